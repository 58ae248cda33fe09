import type { INestApplicationContext } from '@nestjs/common';
import { firstValueFrom, filter, take, toArray } from 'rxjs';
import type pg from 'pg';
import {
  OnJobEvent,
  QueueService,
  RetryAfterError,
  Task,
  UnrecoverableError,
  type JobContext,
  type JobEvent,
  type LocalJobEvent,
  type TaskHandler,
} from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';

const seen: string[] = [];

@Task('ok', { queue: 'work' })
class Ok implements TaskHandler<{ n: number }> {
  async handle(args: { n: number }, ctx: JobContext) {
    seen.push(`${ctx.id}:${args.n}`);
    return { doubled: args.n * 2 };
  }
}

@Task('introspect', { queue: 'work' })
class Introspect implements TaskHandler<Record<string, never>> {
  serialised: unknown;
  keys: string[] = [];
  async handle(_args: Record<string, never>, ctx: JobContext) {
    this.keys = Object.keys(ctx);
    this.serialised = JSON.parse(JSON.stringify(ctx));
  }
}

@Task('flaky', { queue: 'work', maxAttempts: 3, backoff: { baseMs: 10, maxMs: 20 } })
class Flaky implements TaskHandler<{ failTimes: number }> {
  async handle(args: { failTimes: number }, ctx: JobContext) {
    if (ctx.attempt <= args.failTimes) throw new Error(`boom on attempt ${ctx.attempt}`);
  }
}

@Task('doomed', { queue: 'work', maxAttempts: 2, backoff: { baseMs: 10, maxMs: 10 }, deadLetterQueue: 'work-dead' })
class Doomed implements TaskHandler {
  async handle() {
    throw new Error('always fails 0xdeadbeef');
  }
}

@Task('unrecoverable', { queue: 'work', deadLetterQueue: 'work-dead' })
class Unrecoverable implements TaskHandler {
  async handle() {
    throw new UnrecoverableError('bad input, never retry');
  }
}

@Task('retry-after', { queue: 'work', maxAttempts: 2 })
class RetryAfter implements TaskHandler {
  async handle(_: object, ctx: JobContext) {
    if (ctx.attempt === 1) throw new RetryAfterError(30_000, 'rate limited');
  }
}

@Task('slow', { queue: 'work', expireSeconds: 1, maxAttempts: 1, deadLetterQueue: 'work-dead' })
class Slow implements TaskHandler {
  aborted = 0;
  async handle(_: object, ctx: JobContext) {
    await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => (this.aborted++, resolve())));
  }
}

@Task('touching', { queue: 'work', expireSeconds: 1 })
class Touching implements TaskHandler {
  async handle(_: object, ctx: JobContext) {
    for (let i = 0; i < 4; i++) {
      await new Promise((r) => setTimeout(r, 400));
      expect(await ctx.touch()).toBe(true);
    }
  }
}

@Task('cancellable', { queue: 'work' })
class Cancellable implements TaskHandler {
  started = new Set<string>();
  abortedAt = new Map<string, number>();
  async handle(_: object, ctx: JobContext) {
    this.started.add(ctx.id);
    await new Promise<void>((resolve) =>
      ctx.signal.addEventListener('abort', () => {
        this.abortedAt.set(ctx.id, Date.now());
        resolve();
      }),
    );
  }
}

@Task('checkpointed', { queue: 'work', maxAttempts: 3, backoff: { baseMs: 10, maxMs: 10 } })
class Checkpointed implements TaskHandler<{ upTo: number }> {
  resumedFrom: unknown[] = [];
  async handle(args: { upTo: number }, ctx: JobContext) {
    this.resumedFrom.push(ctx.checkpoint);
    const start = (ctx.checkpoint as { done?: number } | null)?.done ?? 0;
    for (let i = start; i < args.upTo; i++) {
      await ctx.saveCheckpoint({ done: i + 1 });
      if (ctx.attempt === 1 && i === 2) throw new Error('crash midway');
    }
  }
}

class EventSink {
  events: JobEvent[] = [];
  @OnJobEvent(['completed', 'discarded'])
  record(event: JobEvent) {
    this.events.push(event);
  }
}

describe('worker', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let queue: QueueService;
  let sql: pg.Client;

  const job = async (id: string) => (await sql.query(`SELECT * FROM stampeded_jobs WHERE id = $1`, [id])).rows[0];
  const stateOf = async (id: string, state: string) => waitFor(async () => (await job(id))?.state === state && job(id), `job ${id} to be ${state}`);

  beforeAll(async () => {
    db = await testDatabase();
    app = await bootApp(db.url, {
      providers: [Ok, Introspect, Flaky, Doomed, Unrecoverable, RetryAfter, Slow, Touching, Cancellable, Checkpointed, EventSink],
      stampeded: { worker: { concurrency: 8, shutdownTimeoutMs: 2000 } },
    });
    queue = app.get(QueueService);
    sql = await sqlClient(db.url);
  });

  afterAll(async () => {
    await sql?.end();
    await app?.close();
    await db?.drop();
  });

  it('runs jobs and records completion, and tells events$ and @OnJobEvent', async () => {
    const completed = firstValueFrom(
      queue.events$.pipe(
        filter((e) => e.type === 'completed' && e.task === 'ok'),
        take(3),
        toArray(),
      ),
    );
    const ids = (await queue.enqueueMany([1, 2, 3].map((n) => ({ task: 'ok', args: { n } })))).map((r) => r.id);
    const events = await completed;
    expect(events.map((e) => e.result)).toEqual(expect.arrayContaining([{ doubled: 2 }, { doubled: 4 }, { doubled: 6 }]));
    for (const id of ids) expect(await job(id)).toMatchObject({ state: 'completed', attempt: 1, claimed_by: null });
    expect(app.get(EventSink).events.filter((e) => ids.includes(e.jobId))).toHaveLength(3);
  });

  it('hands the handler a context that shows the job and nothing of the worker, and reports the claimed job as stored', async () => {
    const completed = firstValueFrom(
      queue.events$.pipe(
        filter((e): e is LocalJobEvent => e.origin === 'local' && e.type === 'completed' && e.task === 'introspect'),
        take(1),
      ),
    );
    const { id } = await queue.enqueue('introspect', {}, { tenantId: 't1', destination: 'api', meta: { k: 'v' } });
    const event = await completed;
    const handler = app.get(Introspect);
    expect(handler.keys.sort()).toEqual(['attempt', 'checkpoint', 'destination', 'id', 'maxAttempts', 'meta', 'orderingKey', 'queue', 'task', 'tenantId']);
    expect(handler.serialised).toEqual({
      id,
      queue: 'work',
      task: 'introspect',
      attempt: 1,
      maxAttempts: 25,
      tenantId: 't1',
      destination: 'api',
      orderingKey: null,
      meta: { nestjs: { k: 'v' } },
      checkpoint: null,
    });
    // The claim sends times as numbers and leaves out a first attempt's attempted_by; the job says what the row says.
    const row = await job(id);
    expect(event.job.attemptedBy).toEqual(row.attempted_by);
    expect(event.job.attemptedBy).toEqual([event.workerId]);
    for (const [field, column] of [
      ['scheduledAt', 'scheduled_at'],
      ['insertedAt', 'inserted_at'],
      ['heartbeatAt', 'heartbeat_at'],
      ['claimedAt', 'claimed_at'],
    ] as const) {
      expect(event.job[field]).toBeInstanceOf(Date);
      expect(Math.abs((event.job[field] as Date).getTime() - (row[column] ?? row.heartbeat_at).getTime())).toBeLessThan(1);
    }
  });

  it('retries a throw after a backoff until it succeeds, keeping the error history', async () => {
    const { id } = await queue.enqueue('flaky', { failTimes: 2 });
    const row = await stateOf(id, 'completed');
    expect(row.attempt).toBe(3);
    expect(row.errors).toHaveLength(2);
    expect(row.errors.map((e: { kind: string }) => e.kind)).toEqual(['raised', 'raised']);
    expect(row.errors[1].message).toContain('boom on attempt 2');
  });

  it('discards after max_attempts and copies to the dead-letter queue with provenance', async () => {
    const { id } = await queue.enqueue('doomed', { x: 1 }, { meta: { origin: 'test' } });
    const row = await stateOf(id, 'discarded');
    expect(row).toMatchObject({ attempt: 2, failure_kind: 'raised' });
    expect(row.last_error).toContain('always fails 0xdeadbeef');
    expect(row.error_fingerprint).not.toBeNull();
    const { rows: dead } = await sql.query(`SELECT * FROM stampeded_jobs WHERE source_id = $1`, [id]);
    expect(dead).toHaveLength(1);
    expect(dead[0]).toMatchObject({
      queue: 'work-dead',
      task: 'doomed',
      args: { x: 1 },
      source_queue: 'work',
      source_attempts: 2,
      dead_letter_queue: null,
      meta: { nestjs: { origin: 'test' } },
    });
  });

  it('discards an UnrecoverableError at once', async () => {
    const { id } = await queue.enqueue('unrecoverable', {});
    const row = await stateOf(id, 'discarded');
    expect(row).toMatchObject({ attempt: 1, failure_kind: 'unrecoverable' });
    expect((await sql.query(`SELECT 1 FROM stampeded_jobs WHERE source_id = $1`, [id])).rowCount).toBe(1);
  });

  it('honours a RetryAfterError delay', async () => {
    const { id } = await queue.enqueue('retry-after', {});
    const row = await stateOf(id, 'retryable');
    const delay = (new Date(row.scheduled_at).getTime() - Date.now()) / 1000;
    expect(delay).toBeGreaterThan(25);
    expect(delay).toBeLessThanOrEqual(30);
  });

  it('times out past expire_seconds: the signal fires and the job fails timed_out', async () => {
    const { id } = await queue.enqueue('slow', {});
    const row = await stateOf(id, 'discarded');
    expect(row.failure_kind).toBe('timed_out');
    expect(app.get(Slow).aborted).toBeGreaterThanOrEqual(1);
    expect((await sql.query(`SELECT 1 FROM stampeded_jobs WHERE source_id = $1`, [id])).rowCount).toBe(1);
  });

  it('keeps a job alive while it touches', async () => {
    const { id } = await queue.enqueue('touching', {});
    const row = await stateOf(id, 'completed');
    expect(row.attempt).toBe(1);
  });

  it('cancels a running job: fenced at once, and the handler signal fires', async () => {
    const handler = app.get(Cancellable);
    const { id } = await queue.enqueue('cancellable', {});
    await waitFor(() => handler.started.has(id), 'the handler to start');
    const result = await queue.cancel(id);
    const cancelledAt = Date.now();
    expect(result).toMatchObject({ cancelled: true, previousState: 'executing' });
    expect(await job(id)).toMatchObject({ state: 'cancelled', failure_kind: 'cancelled', claimed_by: null });
    await waitFor(() => handler.abortedAt.has(id), 'the signal to fire', 2000);
    expect(handler.abortedAt.get(id)! - cancelledAt).toBeLessThan(2000);
    // Whatever the worker does next, the job stays cancelled.
    await new Promise((r) => setTimeout(r, 200));
    expect((await job(id)).state).toBe('cancelled');
  });

  it('resumes a re-run from its checkpoint', async () => {
    const handler = app.get(Checkpointed);
    const { id } = await queue.enqueue('checkpointed', { upTo: 5 });
    const row = await stateOf(id, 'completed');
    expect(row.attempt).toBe(2);
    expect(handler.resumedFrom).toEqual([null, { done: 3 }]);
    expect(row.checkpoint).toBeNull();
    expect(row.checkpoint_seq).toBe(5);
  });

  it('fails a job with no handler here visibly, and keeps it for retry', async () => {
    const { id } = await queue.enqueue('nobody-handles-this', {}, { queue: 'work', backoff: { baseMs: 30000 } });
    const row = await stateOf(id, 'retryable');
    expect(row.failure_kind).toBe('raised');
    expect(row.last_error).toContain('No handler for task "nobody-handles-this"');
    expect(row.attempt).toBe(1);
  });

  it('runs a job inserted by plain SQL, as another runtime would, and keeps its meta', async () => {
    const { rows } = await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, args, meta) VALUES ('work', 'ok', '{"n": 21}', '{"activejob": {"job_class": "X"}}') RETURNING id`,
    );
    const row = await stateOf(rows[0].id, 'completed');
    expect(row.meta).toEqual({ activejob: { job_class: 'X' } });
  });
});
