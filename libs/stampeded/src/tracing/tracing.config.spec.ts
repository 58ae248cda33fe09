import { StampededConfigError } from '../errors/stampeded.errors.js';
import type { TracerProviderLike } from '../interfaces/tracing.interface.js';
import { TRACING_DEFAULTS, resolveTracingConfig } from './tracing.config.js';

const provider = { getTracer: () => ({}) } as unknown as TracerProviderLike;

describe('resolveTracingConfig', () => {
  it('traces when it can if unset, never if false, and insists if true or an object', () => {
    expect(resolveTracingConfig(undefined)).toEqual({ mode: 'auto', ...TRACING_DEFAULTS });
    expect(resolveTracingConfig(false)).toEqual({ mode: 'off', ...TRACING_DEFAULTS });
    expect(resolveTracingConfig(true)).toEqual({ mode: 'required', ...TRACING_DEFAULTS });
    expect(resolveTracingConfig({})).toEqual({ mode: 'required', tracerProvider: undefined, ...TRACING_DEFAULTS });
  });

  it('keeps the provider, the tracer name and the parenting given', () => {
    expect(resolveTracingConfig({ tracerProvider: provider, tracerName: 'jobs', parent: 'link' })).toEqual({
      mode: 'required',
      tracerProvider: provider,
      tracerName: 'jobs',
      parent: 'link',
    });
  });

  it('refuses unknown options, listing the allowed ones', () => {
    expect(() => resolveTracingConfig({ exporter: 'otlp' } as never)).toThrow(
      new StampededConfigError('StampededModule.forRoot(): tracing: unknown option "exporter". Allowed: tracerProvider, tracerName, parent.'),
    );
  });

  it.each([
    ['yes', 'tracing must be false, true or { tracerProvider?, tracerName?, parent? }, got "yes"'],
    [[], 'tracing must be false, true or { tracerProvider?, tracerName?, parent? }, got []'],
    [{ tracerProvider: {} }, 'tracing.tracerProvider must be an OpenTelemetry TracerProvider (an object with getTracer()), such as a NodeTracerProvider'],
    [{ tracerName: '' }, 'tracing.tracerName must be a non-empty string, got ""'],
    [{ parent: 'child' }, `tracing.parent must be 'parent' or 'link', got "child"`],
  ])('refuses %j, naming the option', (options, message) => {
    expect(() => resolveTracingConfig(options as never)).toThrow(new StampededConfigError(`StampededModule.forRoot(): ${message}.`));
  });
});
