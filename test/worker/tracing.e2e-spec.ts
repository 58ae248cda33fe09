import { fileURLToPath } from 'node:url';
import type { INestApplicationContext } from '@nestjs/common';
import { context, propagation, trace, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type pg from 'pg';
import { QueueService, StampededConfigError, StampededModule, Task, UnrecoverableError, type JobContext, type TaskHandler } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';

const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/${name}`, import.meta.url));

@Task('traced', { queue: 'traced', maxAttempts: 2, backoff: { baseMs: 10, maxMs: 10 }, deadLetterQueue: 'traced-dead' })
class Traced implements TaskHandler<{ fail?: 'once' | 'unrecoverable'; sleepMs?: number }> {
  async handle(args: { fail?: 'once' | 'unrecoverable'; sleepMs?: number }, ctx: JobContext) {
    // After an await, so that the context crossed an asynchronous boundary.
    await new Promise((resolve) => setTimeout(resolve, 1));
    trace.getTracer('user-code').startSpan('user work').end();
    if (args.sleepMs) {
      await new Promise((resolve, reject) => {
        const timer = setTimeout(resolve, args.sleepMs);
        ctx.signal.addEventListener('abort', () => {
          clearTimeout(timer);
          reject(ctx.signal.reason);
        });
      });
    }
    if (args.fail === 'unrecoverable') throw new UnrecoverableError('corrupt input');
    if (args.fail === 'once' && ctx.attempt === 1) throw new Error('upstream said no');
  }
}

@Task('traced-isolated', { queue: 'traced-isolated', isolation: 'process', processFile: fixture('child.process.mjs'), maxAttempts: 1 })
class TracedIsolated implements TaskHandler<{ mode: string }> {
  handle(): never {
    throw new Error('runs in a child process');
  }
}

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const caller = trace.getTracer('test');

const spans = () => exporter.getFinishedSpans();
const named = (name: string) => spans().filter((s) => s.name === name);
const ofJob = (id: string, name = 'process traced') => named(name).filter((s) => s.attributes['messaging.message.id'] === id);
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;
/** Waits for `count` finished execution spans of one job. */
const executions = (id: string, count = 1, name = 'process traced') =>
  waitFor(
    () => {
      const found = ofJob(id, name);
      return found.length >= count ? found : undefined;
    },
    `${count} execution span(s) of job ${id}`,
    10_000,
  );
const childOf = (parent: ReadableSpan, name: string) => named(name).find((s) => parentOf(s) === parent.spanContext().spanId);

/** Runs `work` inside an active span of the caller's own, as a request handler would. */
async function inRequest<T>(work: () => Promise<T>): Promise<{ result: T; request: ReadableSpan }> {
  const span = caller.startSpan('request');
  const result = await context.with(trace.setSpan(context.active(), span), work);
  span.end();
  return { result, request: named('request').find((s) => s.spanContext().spanId === span.spanContext().spanId)! };
}

describe('OpenTelemetry tracing', () => {
  let db: TestDatabase;
  let sql: pg.Client;
  let app: INestApplicationContext | undefined;
  const extraApps: INestApplicationContext[] = [];

  beforeAll(async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    trace.setGlobalTracerProvider(provider);
    db = await testDatabase();
    sql = await sqlClient(db.url);
  });

  afterEach(async () => {
    await app?.close();
    app = undefined;
    for (const other of extraApps.splice(0)) await other.close();
    exporter.reset();
  });

  afterAll(async () => {
    await sql?.end();
    await db?.drop();
    await provider.shutdown();
    trace.disable();
    propagation.disable();
    context.disable();
  });

  const metaOf = async (id: string) => (await sql.query(`SELECT meta FROM stampeded_jobs WHERE id = $1`, [id])).rows[0]?.meta;

  it('an enqueue in an active span is a producer span, its child, whose context the job carries under meta.nestjs.otel', async () => {
    app = await bootApp(db.url, { providers: [Traced], stampeded: { worker: { enabled: false } } });
    const queue = app.get(QueueService);
    const { result, request } = await inRequest(() => queue.enqueue(Traced, {}, { meta: { requestId: 'r-1' } }));

    const [send] = named('send traced');
    expect(send.kind).toBe(SpanKind.PRODUCER);
    expect(send.spanContext().traceId).toBe(request.spanContext().traceId);
    expect(parentOf(send)).toBe(request.spanContext().spanId);
    expect(send.attributes).toMatchObject({
      'messaging.system': 'stampeded',
      'messaging.operation.type': 'send',
      'messaging.destination.name': 'traced',
      'messaging.message.id': result.id,
      'stampeded.job.task': 'traced',
      'stampeded.job.deduplicated': false,
    });
    expect(send.attributes['messaging.batch.message_count']).toBeUndefined();
    expect(send.instrumentationScope.name).toBe('@stampeded/nestjs');

    // Only this runtime's key, with the user's own meta beside the context.
    const meta = await metaOf(result.id);
    expect(Object.keys(meta)).toEqual(['nestjs']);
    expect(meta.nestjs.requestId).toBe('r-1');
    expect(meta.nestjs.otel.traceparent).toBe(`00-${send.spanContext().traceId}-${send.spanContext().spanId}-01`);
  });

  it("a user's own meta key of the same name is kept, never overwritten", async () => {
    app = await bootApp(db.url, { providers: [Traced], stampeded: { worker: { enabled: false } } });
    const mine = { traceparent: 'mine', note: 'kept' };
    const { result } = await inRequest(() => app!.get(QueueService).enqueue(Traced, {}, { meta: { otel: mine } }));
    expect((await metaOf(result.id)).nestjs).toEqual({ otel: mine });
  });

  it("an execution is a consumer span, the enqueue's child and linked to it, with the job's attributes; the handler's own spans nest under it", async () => {
    app = await bootApp(db.url, { providers: [Traced] });
    const { result } = await inRequest(() => app!.get(QueueService).enqueue(Traced, {}, { tenantId: 'acme', destination: 'api.example.com' }));
    const [process] = await executions(result.id);
    const [send] = named('send traced');

    expect(process.kind).toBe(SpanKind.CONSUMER);
    expect(process.spanContext().traceId).toBe(send.spanContext().traceId);
    expect(parentOf(process)).toBe(send.spanContext().spanId);
    expect(process.links.map((l) => l.context.spanId)).toEqual([send.spanContext().spanId]);
    expect(process.status.code).toBe(SpanStatusCode.UNSET);
    expect(process.attributes).toMatchObject({
      'messaging.system': 'stampeded',
      'messaging.operation.type': 'process',
      'messaging.destination.name': 'traced',
      'messaging.message.id': result.id,
      'stampeded.job.task': 'traced',
      'stampeded.job.attempt': 1,
      'stampeded.job.max_attempts': 2,
      'stampeded.job.tenant_id': 'acme',
      'stampeded.job.destination': 'api.example.com',
      'stampeded.job.outcome': 'completed',
    });

    const user = childOf(process, 'user work');
    expect(user?.spanContext().traceId).toBe(process.spanContext().traceId);
  });

  it('a failed attempt ends with status ERROR and the exception; the retry is a span of its own; a dead-lettered job says so', async () => {
    app = await bootApp(db.url, { providers: [Traced] });
    const queue = app.get(QueueService);
    const once = await queue.enqueue(Traced, { fail: 'once' });
    const unrecoverable = await queue.enqueue(Traced, { fail: 'unrecoverable' });
    const attempts = await executions(once.id, 2);
    const [failed, retried] = attempts.sort((a, b) => Number(a.attributes['stampeded.job.attempt']) - Number(b.attributes['stampeded.job.attempt']));

    expect(failed.status).toEqual({ code: SpanStatusCode.ERROR, message: 'upstream said no' });
    expect(failed.attributes).toMatchObject({ 'stampeded.job.outcome': 'retrying', 'stampeded.job.failure_kind': 'raised' });
    // The backoff's equal jitter: half of 10 ms fixed, half random.
    expect(failed.attributes['stampeded.job.retry_delay_ms']).toBeGreaterThanOrEqual(5);
    expect(failed.attributes['stampeded.job.retry_delay_ms']).toBeLessThanOrEqual(10);
    const exceptions = failed.events.filter((e) => e.name === 'exception');
    expect(exceptions).toHaveLength(1);
    expect(exceptions[0].attributes).toMatchObject({ 'exception.type': 'Error', 'exception.message': 'upstream said no' });
    expect(String(exceptions[0].attributes?.['exception.stacktrace'])).toContain('upstream said no');

    expect(retried.attributes).toMatchObject({ 'stampeded.job.attempt': 2, 'stampeded.job.outcome': 'completed' });
    expect(retried.status.code).toBe(SpanStatusCode.UNSET);
    // Both attempts belong to the one enqueue.
    const [send] = named('send traced').filter((s) => s.attributes['messaging.message.id'] === once.id);
    expect(parentOf(failed)).toBe(send.spanContext().spanId);
    expect(parentOf(retried)).toBe(send.spanContext().spanId);

    const [dead] = await executions(unrecoverable.id);
    expect(dead.status.code).toBe(SpanStatusCode.ERROR);
    expect(dead.attributes).toMatchObject({
      'stampeded.job.outcome': 'discarded',
      'stampeded.job.failure_kind': 'unrecoverable',
      'stampeded.job.dead_lettered': true,
    });
    expect(dead.events.find((e) => e.name === 'exception')?.attributes?.['exception.type']).toBe('UnrecoverableError');
  });

  it('a timed-out execution ends when the timeout is recorded, as an error with the failure kind', async () => {
    app = await bootApp(db.url, { providers: [Traced] });
    const { id } = await app.get(QueueService).enqueue(Traced, { sleepMs: 60_000 }, { expireSeconds: 1, maxAttempts: 1 });
    const [span] = await executions(id);
    expect(span.status.code).toBe(SpanStatusCode.ERROR);
    expect(span.attributes).toMatchObject({ 'stampeded.job.outcome': 'discarded', 'stampeded.job.failure_kind': 'timed_out' });
    expect(span.events.filter((e) => e.name === 'exception').map((e) => e.attributes?.['exception.type'])).toEqual(['timed_out']);
  });

  it('enqueueMany is one producer span with the batch size, and every job carries its context', async () => {
    app = await bootApp(db.url, { providers: [Traced] });
    const { result } = await inRequest(() =>
      app!.get(QueueService).enqueueMany([{ task: 'traced' }, { task: 'traced' }, { task: 'traced', options: { dedup: { scope: 'one' } } }]),
    );
    const [send] = named('send traced');
    expect(named('send traced')).toHaveLength(1);
    expect(send.attributes).toMatchObject({ 'messaging.batch.message_count': 3, 'messaging.destination.name': 'traced', 'stampeded.jobs.deduplicated': 0 });
    expect(send.attributes['messaging.message.id']).toBeUndefined();
    const processed = await waitFor(() => {
      const all = result.map((r) => ofJob(r.id)[0]);
      return all.every(Boolean) ? all : undefined;
    }, 'the three executions');
    for (const span of processed) {
      expect(span.links.map((l) => l.context.spanId)).toEqual([send.spanContext().spanId]);
      expect(parentOf(span)).toBe(send.spanContext().spanId);
    }
    const traceparents = new Set<string>();
    for (const { id } of result) traceparents.add((await metaOf(id)).nestjs.otel.traceparent);
    expect(traceparents.size).toBe(1);
  });

  it('a job enqueued by one app and run by another links across them; parent: link starts a trace of its own', async () => {
    const producer = await bootApp(db.url, { providers: [Traced], stampeded: { worker: { enabled: false } } });
    extraApps.push(producer);
    const { result } = await inRequest(() => producer.get(QueueService).enqueue(Traced, {}));
    const [send] = named('send traced');

    app = await bootApp(db.url, { providers: [Traced], stampeded: { tracing: { parent: 'link' } } });
    const [process] = await executions(result.id);
    expect(process.links.map((l) => l.context.spanId)).toEqual([send.spanContext().spanId]);
    expect(process.links[0].context.traceId).toBe(send.spanContext().traceId);
    expect(process.spanContext().traceId).not.toBe(send.spanContext().traceId);
    expect(process.parentSpanContext).toBeUndefined();
    // The handler's spans still nest under the execution.
    expect(childOf(process, 'user work')).toBeDefined();
  });

  it("a job without a context (plain SQL) is a trace of its own, and other runtimes' meta keys are left as they were", async () => {
    app = await bootApp(db.url, { providers: [Traced] });
    const foreign = {
      activejob: { job_class: 'ImportJob', traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
    };
    const { rows } = await sql.query(`INSERT INTO stampeded_jobs (queue, task, args, meta) VALUES ('traced', 'traced', '{}', $1) RETURNING id::text`, [
      foreign,
    ]);
    const id = rows[0].id as string;
    const [process] = await executions(id);
    expect(process.links).toEqual([]);
    expect(process.parentSpanContext).toBeUndefined();
    expect(process.spanContext().traceId).not.toBe('0af7651916cd43dd8448eb211c80319c');
    expect(await metaOf(id)).toEqual(foreign);
  });

  it('isolation: process has its execution span in the worker', async () => {
    app = await bootApp(db.url, { providers: [TracedIsolated] });
    const { result } = await inRequest(() => app!.get(QueueService).enqueue('traced-isolated', { mode: 'ok' }));
    const [span] = await executions(result.id, 1, 'process traced-isolated');
    const [send] = named('send traced-isolated');
    expect(parentOf(span)).toBe(send.spanContext().spanId);
    expect(span.attributes['stampeded.job.outcome']).toBe('completed');
  });

  it('a tracer provider and name of its own are used instead of the global one', async () => {
    const own = new InMemorySpanExporter();
    const ownProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(own)] });
    try {
      app = await bootApp(db.url, { providers: [Traced], stampeded: { tracing: { tracerProvider: ownProvider, tracerName: 'jobs' } } });
      const { id } = await app.get(QueueService).enqueue(Traced, {});
      await waitFor(() => own.getFinishedSpans().some((s) => s.name === 'process traced'), 'the execution span in the own provider');
      expect(own.getFinishedSpans().map((s) => s.instrumentationScope.name)).toEqual(['jobs', 'jobs']);
      expect(ofJob(id)).toEqual([]);
      expect(named('send traced')).toEqual([]);
    } finally {
      await ownProvider.shutdown();
    }
  });

  it('tracing: false makes no spans and leaves meta alone', async () => {
    app = await bootApp(db.url, { providers: [Traced], stampeded: { tracing: false } });
    const { result } = await inRequest(() => app!.get(QueueService).enqueue(Traced, {}));
    await waitFor(
      async () => (await sql.query(`SELECT 1 FROM stampeded_jobs WHERE id = $1 AND state = 'completed'`, [result.id])).rowCount === 1,
      'the job to complete',
    );
    expect(spans().filter((s) => s.instrumentationScope.name === '@stampeded/nestjs')).toEqual([]);
    expect(await metaOf(result.id)).toEqual({});
  });

  it('a bad tracing option fails at startup, naming it', () => {
    expect(() => StampededModule.forRoot({ tracing: { parent: 'child' as 'link' } })).toThrow(StampededConfigError);
    expect(() => StampededModule.forRoot({ tracing: { parent: 'child' as 'link' } })).toThrow(/tracing\.parent must be 'parent' or 'link'/);
    expect(() => StampededModule.forRoot({ tracing: { tracerProvider: {} as never } })).toThrow(/tracing\.tracerProvider/);
    expect(() => StampededModule.forRoot({ tracing: { sampler: 1 } as never })).toThrow(/unknown option "sampler"/);
  });
});
