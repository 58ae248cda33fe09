import type pg from 'pg';
import {
  DEFAULT_RETRY_POLICY,
  QueueService,
  RetryAfterError,
  Task,
  migrate,
  type FailedAttempt,
  type RetryDecision,
  type RetryPolicy,
  type TaskHandler,
} from '@stampeded/nestjs';
import { drain, type TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase } from '../support/test-app.js';

/** What each policy was asked: attempt, kind and the error's message. */
const asked: Array<[number, string, string]> = [];

@Task('patient', {
  queue: 'policies',
  maxAttempts: 10,
  deadLetterQueue: 'policies-dead',
  retryPolicy: ({ job, kind, error }: FailedAttempt): RetryDecision => {
    asked.push([job.attempt, kind, (error as Error).message]);
    return job.attempt < 3 ? { retry: true, delayMs: job.attempt * 300_000 } : { retry: false };
  },
})
class Patient implements TaskHandler {
  handle(_: object, ctx: { attempt: number }) {
    throw new Error(`boom ${ctx.attempt}`);
  }
}

@Task('impatient', { queue: 'policies', maxAttempts: 1, deadLetterQueue: 'policies-dead' })
class Impatient implements TaskHandler {
  handle() {
    throw new Error('no retries here');
  }
}

/** A policy as an object: a class of the app's own, delegating to the default past its first answer. */
class FixedThenDefault implements RetryPolicy {
  calls = 0;
  nextRetry(failure: FailedAttempt): RetryDecision {
    this.calls++;
    return failure.job.attempt === 2 ? { retry: true, delayMs: 42_000 } : DEFAULT_RETRY_POLICY.nextRetry(failure);
  }
}
const fixedThenDefault = new FixedThenDefault();

@Task('asks-for-its-delay', { queue: 'policies', maxAttempts: 5, backoff: { baseMs: 1000, maxMs: 1000 }, retryPolicy: fixedThenDefault })
class AsksForItsDelay implements TaskHandler {
  handle(_: object, ctx: { attempt: number }) {
    if (ctx.attempt === 1) throw new RetryAfterError(7000);
    throw new Error('plain failure');
  }
}

@Task('slow-to-retry', { queue: 'long-backoff', maxAttempts: 3, backoff: { baseMs: 60_000 } })
class SlowToRetry implements TaskHandler {
  handle() {
    throw new Error('downstream is down');
  }
}

describe('a task that decides its own retries', () => {
  let db: TestDatabase;
  let sql: pg.Client;

  beforeAll(async () => {
    db = await testDatabase();
    await migrate(db.url);
    sql = await sqlClient(db.url);
  });

  afterAll(async () => {
    await sql?.end();
    await db?.drop();
  });

  /** The job's row, and the delay its last failure scheduled: scheduled_at minus the time that failure was recorded. */
  const jobRow = async (id: string) =>
    (
      await sql.query(
        `SELECT state, attempt, failure_kind, finished_at IS NOT NULL AS finished,
                round(extract(epoch FROM scheduled_at - (errors -> -1 ->> 'at')::timestamptz) * 1000)::int AS scheduled_after_ms
           FROM stampeded_jobs WHERE id = $1`,
        [id],
      )
    ).rows[0];

  const deadLetters = async (sourceId: string) =>
    (await sql.query(`SELECT queue, task, source_queue, source_attempts FROM stampeded_jobs WHERE source_id = $1`, [sourceId])).rows;

  it('retries at the delays its policy returned, and giving up early dead-letters the job as spent attempts do', async () => {
    const app = await bootApp(db.url, { providers: [Patient, Impatient], stampeded: { worker: { enabled: false } } });
    const queue = app.get(QueueService);
    const { id } = await queue.enqueue('patient', {});
    const run = () => drain(app, { queue: 'policies', withScheduled: true, maxJobs: 1 });

    expect(await run()).toMatchObject({ retrying: 1 });
    expect(await jobRow(id)).toEqual({ state: 'retryable', attempt: 1, failure_kind: 'raised', finished: false, scheduled_after_ms: 300_000 });
    expect(await run()).toMatchObject({ retrying: 1 });
    expect(await jobRow(id)).toEqual({ state: 'retryable', attempt: 2, failure_kind: 'raised', finished: false, scheduled_after_ms: 600_000 });

    // The third answer gives up, with seven attempts left.
    expect(await run()).toMatchObject({ discarded: 1 });
    expect(await jobRow(id)).toMatchObject({ state: 'discarded', attempt: 3, failure_kind: 'unrecoverable', finished: true });
    expect(asked).toEqual([
      [1, 'raised', 'boom 1'],
      [2, 'raised', 'boom 2'],
      [3, 'raised', 'boom 3'],
    ]);
    expect(await deadLetters(id)).toEqual([{ queue: 'policies-dead', task: 'patient', source_queue: 'policies', source_attempts: 3 }]);

    // A job of the default policy whose attempts are spent leaves the same dead letter.
    const spent = await queue.enqueue('impatient', {});
    expect(await run()).toMatchObject({ discarded: 1 });
    expect(await jobRow(spent.id)).toMatchObject({ state: 'discarded', attempt: 1, failure_kind: 'raised', finished: true });
    expect(await deadLetters(spent.id)).toEqual([{ queue: 'policies-dead', task: 'impatient', source_queue: 'policies', source_attempts: 1 }]);
    await app.close();
  });

  it('takes a policy object; a RetryAfterError still sets its own delay without asking it', async () => {
    const app = await bootApp(db.url, { providers: [AsksForItsDelay], stampeded: { worker: { enabled: false } } });
    const { id } = await app.get(QueueService).enqueue('asks-for-its-delay', {});
    const run = () => drain(app, { queue: 'policies', withScheduled: true, maxJobs: 1 });

    expect(await run()).toMatchObject({ retrying: 1 });
    expect(await jobRow(id)).toMatchObject({ state: 'retryable', attempt: 1, scheduled_after_ms: 7000 });
    expect(fixedThenDefault.calls).toBe(0);

    expect(await run()).toMatchObject({ retrying: 1 });
    expect(await jobRow(id)).toMatchObject({ state: 'retryable', attempt: 2, scheduled_after_ms: 42_000 });

    // Past its own answer it delegates to the default: the backoff, capped here at backoff.maxMs (half of it fixed).
    expect(await run()).toMatchObject({ retrying: 1 });
    const third = await jobRow(id);
    expect(third).toMatchObject({ state: 'retryable', attempt: 3 });
    expect(third.scheduled_after_ms).toBeGreaterThanOrEqual(500);
    expect(third.scheduled_after_ms).toBeLessThanOrEqual(1000);
    expect(fixedThenDefault.calls).toBe(2);
    await app.close();
  });

  it('backs off from a base of a minute: stored whole by every insert, and the retries scheduled from it', async () => {
    const app = await bootApp(db.url, { providers: [SlowToRetry], stampeded: { worker: { enabled: false } } });
    const queue = app.get(QueueService);
    const base = async (id: string) => (await sql.query(`SELECT backoff_base_ms, backoff_base_wide_ms FROM stampeded_jobs WHERE id = $1`, [id])).rows[0];

    // One job (its own statement), a batch, and a job with a dedup scope: the three insert statements.
    const { id } = await queue.enqueue(SlowToRetry, {});
    const [many, short] = await queue.enqueueMany([
      { task: 'slow-to-retry', options: { backoff: { baseMs: 90_000 } } },
      { task: 'slow-to-retry', options: { backoff: { baseMs: 500 } } },
    ]);
    const deduplicated = await queue.enqueue('slow-to-retry', {}, { dedup: { scope: 'long-base' } });
    expect(await base(id)).toEqual({ backoff_base_ms: 32767, backoff_base_wide_ms: 60_000 });
    expect(await base(many.id)).toEqual({ backoff_base_ms: 32767, backoff_base_wide_ms: 90_000 });
    expect(await base(short.id)).toEqual({ backoff_base_ms: 500, backoff_base_wide_ms: null });
    expect(await base(deduplicated.id)).toEqual({ backoff_base_ms: 32767, backoff_base_wide_ms: 60_000 });
    expect((await queue.getJob(id))?.backoffBaseMs).toBe(60_000);
    expect((await queue.getJob(short.id))?.backoffBaseMs).toBe(500);

    // The schema holds every writer to one way of storing a base.
    await expect(sql.query(`UPDATE stampeded_jobs SET backoff_base_wide_ms = 1000 WHERE id = $1`, [short.id])).rejects.toThrow(
      /stampeded_jobs_backoff_base_wide_check/,
    );
    for (const other of [many.id, short.id, deduplicated.id]) await queue.cancel(other);

    // Equal jitter: the first retry half a minute to a minute on, the second one to two minutes.
    const run = () => drain(app, { queue: 'long-backoff', withScheduled: true, maxJobs: 1 });
    expect(await run()).toMatchObject({ retrying: 1 });
    const first = await jobRow(id);
    expect(first).toMatchObject({ state: 'retryable', attempt: 1, failure_kind: 'raised' });
    expect(first.scheduled_after_ms).toBeGreaterThanOrEqual(30_000);
    expect(first.scheduled_after_ms).toBeLessThanOrEqual(60_000);
    expect(await run()).toMatchObject({ retrying: 1 });
    const second = await jobRow(id);
    expect(second).toMatchObject({ state: 'retryable', attempt: 2 });
    expect(second.scheduled_after_ms).toBeGreaterThanOrEqual(60_000);
    expect(second.scheduled_after_ms).toBeLessThanOrEqual(120_000);
    await app.close();
  });

  it('refuses, at bootstrap, a retryPolicy that is neither a function nor an object with nextRetry', async () => {
    for (const retryPolicy of [42, { next: () => ({ retry: false }) }]) {
      @Task('badly-retried', { queue: 'policies', retryPolicy: retryPolicy as never })
      class BadlyRetried implements TaskHandler {
        handle() {}
      }
      await expect(bootApp(db.url, { providers: [BadlyRetried], stampeded: { worker: { enabled: false } } })).rejects.toThrow(
        /@Task\('badly-retried'\) on BadlyRetried: retryPolicy must be a function \(failure\) => decision or an object with a nextRetry\(failure\) method/,
      );
    }
  });
});
