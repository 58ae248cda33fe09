import type { Provider } from '@nestjs/common';
import { STAMPEDED_OPTIONS } from '../stampeded.constants.js';
import { JobTracer } from './job-tracer.js';
import { resolveTracingConfig } from './tracing.config.js';
import type { StampededModuleOptions } from '../interfaces/stampeded-options.interface.js';

/** Injection token of the app's JobTracer: null when tracing is off or @opentelemetry/api is not installed. */
export const JOB_TRACER = Symbol('STAMPEDED_JOB_TRACER');

export function createTracerProvider(): Provider {
  return {
    provide: JOB_TRACER,
    inject: [STAMPEDED_OPTIONS],
    useFactory: (options: StampededModuleOptions) => JobTracer.load(resolveTracingConfig(options.tracing)),
  };
}
