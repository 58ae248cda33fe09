import { StampededConfigError } from '../errors/stampeded.errors.js';
import { INVALID_TRACING_OPTION, UNKNOWN_OPTIONS } from '../stampeded.messages.js';
import type { TracerProviderLike, TracingOptions } from '../interfaces/tracing.interface.js';

/** Every tracing setting, resolved. */
export interface TracingConfig {
  /**
   * `'auto'` (the option unset): trace when @opentelemetry/api is installed,
   * run unchanged when it is not. `'required'` (`true` or an object): the
   * user asked for spans, so a missing package fails the startup.
   */
  mode: 'off' | 'auto' | 'required';
  tracerProvider?: TracerProviderLike;
  tracerName: string;
  parent: 'parent' | 'link';
}

export const TRACING_DEFAULTS = { tracerName: '@stampeded/nestjs', parent: 'parent' } as const;

const OPTION_NAMES = ['tracerProvider', 'tracerName', 'parent'] as const;

const fail = (option: string, problem: string) => new StampededConfigError(INVALID_TRACING_OPTION(option, problem));

/** Resolves and checks the tracing option: a bad value fails at startup, naming the option. */
export function resolveTracingConfig(options: TracingOptions | boolean | undefined): TracingConfig {
  const defaults = { tracerName: TRACING_DEFAULTS.tracerName, parent: TRACING_DEFAULTS.parent };
  if (options === undefined) return { mode: 'auto', ...defaults };
  if (options === false) return { mode: 'off', ...defaults };
  if (options === true) return { mode: 'required', ...defaults };
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw fail('', `must be false, true or { tracerProvider?, tracerName?, parent? }, got ${JSON.stringify(options)}`);
  }
  const unknown = Object.keys(options).filter((k) => !(OPTION_NAMES as readonly string[]).includes(k));
  if (unknown.length) throw new StampededConfigError(UNKNOWN_OPTIONS('StampededModule.forRoot(): tracing', unknown, OPTION_NAMES));
  const { tracerProvider, tracerName, parent } = options;
  if (tracerProvider !== undefined && typeof (tracerProvider as Partial<TracerProviderLike> | null)?.getTracer !== 'function') {
    throw fail('tracerProvider', 'must be an OpenTelemetry TracerProvider (an object with getTracer()), such as a NodeTracerProvider');
  }
  if (tracerName !== undefined && (typeof tracerName !== 'string' || tracerName.length === 0)) {
    throw fail('tracerName', `must be a non-empty string, got ${JSON.stringify(tracerName)}`);
  }
  if (parent !== undefined && parent !== 'parent' && parent !== 'link') {
    throw fail('parent', `must be 'parent' or 'link', got ${JSON.stringify(parent)}`);
  }
  return { mode: 'required', tracerProvider, tracerName: tracerName ?? defaults.tracerName, parent: parent ?? defaults.parent };
}
