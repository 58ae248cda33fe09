import type { Attributes, Context, Span, SpanContext, Tracer } from '@opentelemetry/api';
import { StampededConfigError } from '../errors/stampeded.errors.js';
import { RUNTIME_META_KEY } from '../stampeded.constants.js';
import { OTEL_API_MISSING } from '../stampeded.messages.js';
import { withRuntimeMetaKey, type JobRow } from '../queue/job-input.validator.js';
import type { Job } from '../interfaces/job.interface.js';
import type { JobEvent, JobEventType } from '../interfaces/job-event.interface.js';
import type { EnqueueResult } from '../interfaces/job-options.interface.js';
import type { TracingConfig } from './tracing.config.js';

type OtelApi = typeof import('@opentelemetry/api');

/** Where, under meta.nestjs, a job carries the trace context of its enqueue. */
export const TRACE_CONTEXT_META_KEY = 'otel';

/** The messaging.system of every span, as the semantic conventions name the broker. */
const MESSAGING_SYSTEM = 'stampeded';

/** The events that end an execution: what the worker recorded, or that it recorded nothing. */
const OUTCOMES: ReadonlySet<JobEventType> = new Set(['completed', 'retrying', 'discarded', 'cancelled', 'released', 'lost']);

/**
 * Failure kinds that are the runtime declining to run the job (a tenant over
 * its share, an open breaker): the attempt is refunded and the job did not
 * fail, so its span is not an error.
 */
const DEFERRALS: ReadonlySet<string> = new Set(['throttled', 'breaker_open']);

interface Execution {
  span: Span;
  /** The handler's own error message, once it threw: the failure event adds no second exception. */
  raised?: string;
}

/**
 * OpenTelemetry spans for Stampeded, following the messaging semantic
 * conventions: a producer span per enqueue call (`send <queue>`), whose
 * context each job carries in meta.nestjs.otel, and a consumer span per
 * execution (`process <queue>`), linked to that context and, by default, its
 * child. Made only when @opentelemetry/api is installed; without a registered
 * SDK its tracer is a no-op and so are these spans.
 */
export class JobTracer {
  /** Keyed by the job object the worker runs, so that a job that never reports an outcome is not held. */
  private readonly executions = new WeakMap<Job, Execution>();

  private constructor(
    private readonly api: OtelApi,
    private readonly tracer: Tracer,
    private readonly parent: TracingConfig['parent'],
    /**
     * True while no SDK is registered behind the global provider: every span
     * would be a no-op, and so is all the work around it. Asked per job, as
     * an SDK may be registered after this app starts.
     */
    private readonly idle: () => boolean,
  ) {}

  /**
   * Loads @opentelemetry/api when this app starts, so that an app without it
   * runs unchanged, and answers null when tracing is off or, unasked for,
   * the package is not installed.
   */
  static async load(config: TracingConfig): Promise<JobTracer | null> {
    if (config.mode === 'off') return null;
    let api: OtelApi;
    try {
      api = await import('@opentelemetry/api');
    } catch (err) {
      if (config.mode === 'auto') return null;
      throw new StampededConfigError(OTEL_API_MISSING((err as Error)?.message ?? String(err)));
    }
    // The global provider's tracer is a proxy: an SDK registered after this app starts is still used.
    const provider = (config.tracerProvider as OtelApi['trace'] | undefined) ?? api.trace;
    // A proxy without a delegate answers the API's own no-op provider.
    const noop = new api.ProxyTracerProvider().getDelegate();
    const idle = config.tracerProvider
      ? () => false
      : () => (api.trace.getTracerProvider() as InstanceType<OtelApi['ProxyTracerProvider']>).getDelegate?.() === noop;
    return new JobTracer(api, provider.getTracer(config.tracerName), config.parent, idle);
  }

  /**
   * Runs an enqueue's insert in a producer span, a child of the caller's
   * active span, with the span's context under meta.nestjs.otel of every job.
   * `batch`: enqueueMany(), one span for all its jobs.
   */
  async enqueue(rows: JobRow[], batch: boolean, insert: (rows: JobRow[]) => Promise<EnqueueResult[]>): Promise<EnqueueResult[]> {
    if (this.idle()) return insert(rows);
    const { context, propagation, trace, SpanKind } = this.api;
    const queue = rows.every((row) => row.queue === rows[0].queue) ? rows[0].queue : undefined;
    const attributes: Attributes = {
      'messaging.system': MESSAGING_SYSTEM,
      'messaging.operation.type': 'send',
      'messaging.operation.name': 'send',
    };
    // A batch across queues has no one destination; the conventions then leave it unset.
    if (queue !== undefined) attributes['messaging.destination.name'] = queue;
    if (batch) attributes['messaging.batch.message_count'] = rows.length;
    if (rows.every((row) => row.task === rows[0].task)) attributes['stampeded.job.task'] = rows[0].task;
    const span = this.tracer.startSpan(queue === undefined ? 'send' : `send ${queue}`, { kind: SpanKind.PRODUCER, attributes });
    const active = trace.setSpan(context.active(), span);
    // Whatever the app's propagator writes (W3C traceparent and tracestate by
    // default); nothing at all without a registered SDK, so that no job grows.
    const carrier: Record<string, string> = {};
    propagation.inject(active, carrier);
    const json = Object.keys(carrier).length ? JSON.stringify(carrier) : undefined;
    const traced = json === undefined ? rows : rows.map((row) => ({ ...row, meta: withRuntimeMetaKey(row.meta, TRACE_CONTEXT_META_KEY, json) }));
    try {
      // The insert's own spans (a pg instrumentation's) nest under this one.
      const results = await context.with(active, () => insert(traced));
      if (results.length === 1) {
        span.setAttribute('messaging.message.id', results[0].id);
        span.setAttribute('stampeded.job.deduplicated', results[0].deduplicated);
      } else {
        span.setAttribute('stampeded.jobs.deduplicated', results.filter((r) => r.deduplicated).length);
      }
      return results;
    } catch (err) {
      this.recordError(span, err);
      throw err;
    } finally {
      span.end();
    }
  }

  /**
   * Runs one execution of a job inside its consumer span, so that the
   * handler's own spans and outgoing calls nest under it. The span ends when
   * the worker reports the job's outcome (see `observe`), which for a timeout
   * comes before the handler returns.
   */
  execute<T>(job: Job, workerId: string, run: () => Promise<T>): Promise<T> {
    if (this.idle()) return run();
    const { context, trace, SpanKind } = this.api;
    const enqueued = this.enqueueContext(job);
    const producer = trace.getSpanContext(enqueued);
    const attributes: Attributes = {
      'messaging.system': MESSAGING_SYSTEM,
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'process',
      'messaging.destination.name': job.queue,
      'messaging.message.id': job.id,
      'stampeded.job.task': job.task,
      'stampeded.job.attempt': job.attempt,
      'stampeded.job.max_attempts': job.maxAttempts,
      'stampeded.worker.id': workerId,
    };
    if (job.tenantId) attributes['stampeded.job.tenant_id'] = job.tenantId;
    if (job.destination) attributes['stampeded.job.destination'] = job.destination;
    const span = this.tracer.startSpan(
      `process ${job.queue}`,
      {
        kind: SpanKind.CONSUMER,
        attributes,
        links: producer ? [{ context: producer }] : [],
        root: this.parent === 'link',
      },
      enqueued,
    );
    this.executions.set(job, { span });
    return context.with(trace.setSpan(enqueued, span), run);
  }

  /** The handler threw: its error, with its stack, goes on the execution's span. */
  raised(job: Job, error: unknown): void {
    const execution = this.executions.get(job);
    if (!execution) return;
    execution.span.recordException(error instanceof Error ? error : String(error));
    execution.raised = firstLine(error instanceof Error ? error.message : String(error)) ?? '';
  }

  /** A job event of a worker: a failure marks the execution's span, an outcome ends it. */
  observe(type: JobEventType, job: Job, detail: Partial<JobEvent>): void {
    const execution = this.executions.get(job);
    if (!execution) return;
    const { span } = execution;
    if (detail.failureKind) span.setAttribute('stampeded.job.failure_kind', detail.failureKind);
    if (type === 'failed') {
      if (detail.failureKind && DEFERRALS.has(detail.failureKind)) return;
      const message = execution.raised || (firstLine(detail.error) ?? detail.failureKind ?? 'failed');
      if (execution.raised === undefined) span.recordException({ name: detail.failureKind ?? 'Error', message });
      span.setStatus({ code: this.api.SpanStatusCode.ERROR, message });
      return;
    }
    if (!OUTCOMES.has(type)) return;
    span.setAttribute('stampeded.job.outcome', type);
    if (type === 'retrying' && detail.retryDelayMs !== undefined) span.setAttribute('stampeded.job.retry_delay_ms', detail.retryDelayMs);
    if (type === 'discarded') span.setAttribute('stampeded.job.dead_lettered', detail.deadLettered === true);
    if (type === 'lost') {
      span.setStatus({
        code: this.api.SpanStatusCode.ERROR,
        message: firstLine(detail.error) ?? 'the worker no longer owned the job: nothing was recorded',
      });
    }
    this.executions.delete(job);
    span.end();
  }

  /**
   * The context a job's enqueue left in its meta, on the root context: the
   * worker starts a job from whatever context last woke it (another job's,
   * an enqueue's connection), and a job belongs to no trace but its enqueue's.
   */
  private enqueueContext(job: Job): Context {
    const { propagation, trace, ROOT_CONTEXT } = this.api;
    const own = job.meta?.[RUNTIME_META_KEY] as Record<string, unknown> | undefined;
    const stored = own?.[TRACE_CONTEXT_META_KEY];
    if (stored === null || typeof stored !== 'object' || Array.isArray(stored)) return ROOT_CONTEXT;
    const carrier: Record<string, string> = {};
    for (const [key, value] of Object.entries(stored)) if (typeof value === 'string') carrier[key] = value;
    const extracted = propagation.extract(ROOT_CONTEXT, carrier);
    const producer: SpanContext | undefined = trace.getSpanContext(extracted);
    return producer && trace.isSpanContextValid(producer) ? extracted : ROOT_CONTEXT;
  }

  private recordError(span: Span, err: unknown): void {
    span.recordException(err instanceof Error ? err : String(err));
    span.setStatus({ code: this.api.SpanStatusCode.ERROR, message: firstLine(err instanceof Error ? err.message : String(err)) });
  }
}

function firstLine(text: string | undefined): string | undefined {
  if (!text) return undefined;
  const end = text.indexOf('\n');
  return end < 0 ? text : text.slice(0, end);
}
