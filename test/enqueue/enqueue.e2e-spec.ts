import type { INestApplicationContext } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type pg from 'pg';
import { InvalidJobError, QueueService, Task, type JobContext, type TaskHandler } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase } from '../support/test-app.js';

@Task('send-email', { queue: 'emails', maxAttempts: 5, expireSeconds: 60, deadLetterQueue: 'emails-dead' })
class SendEmail implements TaskHandler<{ to: string }> {
  async handle(_args: { to: string }, _ctx: JobContext) {}
}

describe('enqueue', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let queue: QueueService;
  let sql: pg.Client;

  beforeAll(async () => {
    db = await testDatabase();
    app = await bootApp(db.url, { providers: [SendEmail], stampeded: { worker: { enabled: false } } });
    queue = app.get(QueueService);
    sql = await sqlClient(db.url);
  });

  afterAll(async () => {
    await sql?.end();
    await app?.close();
    await db?.drop();
  });

  it('inserts a job with the task defaults, by class or by name', async () => {
    const byClass = await queue.enqueue(SendEmail, { to: 'a@b.c' });
    const byName = await queue.enqueue('send-email', { to: 'd@e.f' }, { priority: 3, tenantId: 't1', destination: 'smtp' });
    expect(byClass.deduplicated).toBe(false);
    const { rows } = await sql.query(`SELECT * FROM stampeded_jobs WHERE id = ANY($1) ORDER BY id`, [[byClass.id, byName.id]]);
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatchObject({
      queue: 'emails',
      task: 'send-email',
      args: { to: 'a@b.c' },
      state: 'available',
      max_attempts: 5,
      expire_seconds: 60,
      dead_letter_queue: 'emails-dead',
      priority: 0,
    });
    expect(rows[1]).toMatchObject({ priority: 3, tenant_id: 't1', destination: 'smtp' });
  });

  it('reads a job back by its task, class or name, and answers null for a job of another task', async () => {
    const { id } = await queue.enqueue(SendEmail, { to: 'typed@b.c' });
    const other = await queue.enqueue('welcome', { user: 7 });

    const byClass = await queue.getJob(SendEmail, id);
    expect(byClass).toMatchObject({ id, task: 'send-email', args: { to: 'typed@b.c' } });
    expect(await queue.getJob('send-email', id, { queue: 'emails' })).toEqual(byClass);
    expect(await queue.getJob(SendEmail, other.id)).toBeNull();
    expect(await queue.getJob('send-email', id, { queue: 'default' })).toBeNull();
    expect(await queue.getJob<{ user: number }>(other.id)).toMatchObject({ task: 'welcome', args: { user: 7 } });

    class NotATask {}
    await expect(queue.getJob(NotATask as never, id)).rejects.toThrow(/NotATask is not a task: mark it with @Task\('name'\)/);
    await expect(queue.getJob(SendEmail, 'not-a-uuid')).rejects.toThrow(/getJob\(\): "not-a-uuid" is not a job id/);
    // (id, 'emails') reads as (task, id): the id is the one refused.
    await expect(queue.getJob(id, 'emails' as never)).rejects.toThrow(/getJob\(\): "emails" is not a job id/);
    await expect(queue.getJob(SendEmail, id, 42 as never)).rejects.toThrow(/getJob\(\): options must be an object \{ queue\?, logs\?, replica\? \}/);
  });

  it('deduplicates a pending job by scope, and frees the scope once the job is finished', async () => {
    const first = await queue.enqueue('welcome', { user: 42 }, { dedup: { scope: 'welcome:42' } });
    const second = await queue.enqueue('welcome', { user: 42 }, { dedup: { scope: 'welcome:42' } });
    expect(second).toEqual({ id: first.id, deduplicated: true });
    const { rows } = await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE dedup_scope = 'welcome:42'`);
    expect(rows[0].n).toBe(1);
    await queue.cancel(first.id);
    const third = await queue.enqueue('welcome', { user: 42 }, { dedup: { scope: 'welcome:42' } });
    expect(third.deduplicated).toBe(false);
    expect(third.id).not.toBe(first.id);
  });

  it('gives racing duplicates one job and one id, whichever connection wins', async () => {
    const racers = await Promise.all(Array.from({ length: 20 }, (_, i) => queue.enqueue('race', { i }, { dedup: { scope: 'race:1' } })));
    expect(new Set(racers.map((r) => r.id)).size).toBe(1);
    expect(racers.filter((r) => !r.deduplicated)).toHaveLength(1);
    const { rows } = await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE task = 'race'`);
    expect(rows[0].n).toBe(1);
  });

  it('retries a cancelled job with a fresh budget, keeping its history', async () => {
    const { id } = await queue.enqueue('to-retry', {});
    expect(await queue.cancel(id)).toMatchObject({ cancelled: true, previousState: 'available' });
    expect(await queue.cancel(id)).toMatchObject({ cancelled: false, previousState: 'cancelled' });
    expect(await queue.retry(id)).toEqual({ id, retried: true, previousState: 'cancelled' });
    expect(await queue.getJob(id)).toMatchObject({ state: 'available', attempt: 0, failureKind: null, finishedAt: null });
    await expect(queue.retry('00000000-0000-0000-0000-000000000000')).rejects.toThrow(/No job with id/);
    await expect(queue.getJob('not-a-uuid')).rejects.toThrow(/is not a job id/);
  });

  it.each([undefined, 'minute', 'hour', 'day', 'week', 'month'] as const)(
    'finds a committed twin with dedup period %s: the key the enqueue computes is the one the schema generates',
    async (period) => {
      // Not across a minute boundary, where a minute's key rightly changes.
      const toBoundary = 60_000 - (Date.now() % 60_000);
      if (toBoundary < 2_000) await new Promise((resolve) => setTimeout(resolve, toBoundary + 100));
      const dedup = { scope: `twin-${period ?? 'none'}`, ...(period ? { period } : {}) };
      const first = await queue.enqueue('report', {}, { dedup });
      // A batch of two with a dedup scope goes through the statement that computes the key itself.
      const [again, other] = await queue.enqueueMany([
        { task: 'report', args: {}, options: { dedup } },
        { task: 'report', args: {}, options: { dedup: { scope: `other-${period ?? 'none'}` } } },
      ]);
      expect(again).toEqual({ id: first.id, deduplicated: true });
      expect(other.deduplicated).toBe(false);
    },
  );

  it("fills what a job does not set from the jobs table's column defaults, read at startup", async () => {
    const altered = await testDatabase();
    const client = await sqlClient(altered.url);
    try {
      const boot = () => bootApp(altered.url, { via: 'connection', stampeded: { worker: { enabled: false }, maintenance: { enabled: false } } });
      await (await boot()).close();
      await client.query(`ALTER TABLE stampeded_jobs ALTER COLUMN max_attempts SET DEFAULT 7, ALTER COLUMN backoff_base_ms SET DEFAULT 250`);
      const app2 = await boot();
      try {
        const { id } = await app2.get(QueueService).enqueue('anything', {});
        const { rows } = await client.query(`SELECT max_attempts, backoff_base_ms, priority FROM stampeded_jobs WHERE id = $1`, [id]);
        expect(rows[0]).toEqual({ max_attempts: 7, backoff_base_ms: 250, priority: 0 });
      } finally {
        await app2.close();
      }
      await client.query(`ALTER TABLE stampeded_jobs ALTER COLUMN max_attempts SET DEFAULT (2 + 3)`);
      await expect(boot()).rejects.toThrow(/stampeded_jobs\.max_attempts has the default \(2 \+ 3\), which is not an integer constant/);
    } finally {
      await client.end();
      await altered.drop();
    }
  });

  it('answers dedup per job in enqueueMany, duplicates within the batch included', async () => {
    const results = await queue.enqueueMany([
      { task: 'report', args: { n: 1 }, options: { dedup: { scope: 'r', period: 'hour' } } },
      { task: 'report', args: { n: 2 }, options: { dedup: { scope: 'r', period: 'hour' } } },
      { task: 'report', args: { n: 3 } },
    ]);
    expect(results[0].deduplicated).toBe(false);
    expect(results[1]).toEqual({ id: results[0].id, deduplicated: true });
    expect(results[2].deduplicated).toBe(false);
    const again = await queue.enqueueMany([{ task: 'report', args: {}, options: { dedup: { scope: 'r', period: 'hour' } } }]);
    expect(again[0]).toEqual({ id: results[0].id, deduplicated: true });
  });

  it('joins the caller transaction: a rollback leaves no job', async () => {
    const dataSource = app.get(DataSource);
    let id = '';
    await expect(
      dataSource.transaction(async (manager) => {
        id = (await queue.enqueue('in-tx', { a: 1 }, { manager })).id;
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect((await sql.query(`SELECT 1 FROM stampeded_jobs WHERE id = $1`, [id])).rowCount).toBe(0);
    await dataSource.transaction(async (manager) => {
      id = (await queue.enqueue('in-tx', { a: 2 }, { manager })).id;
    });
    expect((await sql.query(`SELECT 1 FROM stampeded_jobs WHERE id = $1`, [id])).rowCount).toBe(1);
  });

  it('counts from the trigger-maintained counters', async () => {
    await queue.enqueueMany(Array.from({ length: 5 }, (_, i) => ({ task: 'count-me', args: { i }, options: { queue: 'counted' } })));
    expect((await queue.counts('counted')).available).toBe(5);
    expect((await queue.counts()).counted.available).toBe(5);
  });

  it.each([
    ['args that are an array', 'x', [1, 2], {}, /args must be a plain JSON object/],
    ['args that are a string', 'x', 'hello', {}, /args must be a plain JSON object/],
    ['args over 1 MB', 'x', { blob: 'x'.repeat(1_100_000) }, {}, /over the 1048576-byte limit/],
    ['a NUL in args', 'x', { s: 'a\u0000b' }, {}, /NUL character/],
    ['an unknown option', 'x', {}, { priorty: 1 }, /unknown option "priorty"/],
    ['priority past smallint', 'x', {}, { priority: 40000 }, /priority must be an integer from -32768 to 32767/],
    ['maxAttempts 0', 'x', {}, { maxAttempts: 0 }, /maxAttempts must be an integer from 1/],
    ['backoff.baseMs past integer', 'x', {}, { backoff: { baseMs: 2 ** 31 } }, /backoff.baseMs must be an integer from 1 to 2147483647/],
    ['a dead-letter queue equal to the queue', 'x', {}, { queue: 'q', deadLetterQueue: 'q' }, /deadLetterQueue is the job's own queue/],
    ['an invalid dedup period', 'x', {}, { dedup: { scope: 's', period: 'fortnight' } }, /dedup.period must be one of minute, hour, day, week, month/],
    ['a queue name too long for a partition', 'x', {}, { queue: 'q'.repeat(49) }, /1 to 48 characters/],
    ['both runAt and delayMs', 'x', {}, { runAt: new Date(), delayMs: 5 }, /cannot both be set/],
  ])('refuses %s before writing anything', async (_what, task, args, options, message) => {
    const before = (await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs`)).rows[0].n;
    const attempt = queue.enqueue(task as string, args as any, options as any);
    await expect(attempt).rejects.toThrow(InvalidJobError);
    await expect(queue.enqueue(task as string, args as any, options as any)).rejects.toThrow(message as RegExp);
    expect((await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs`)).rows[0].n).toBe(before);
  });

  it('schedules by runAt and delayMs on the database clock', async () => {
    const runAt = new Date(Date.now() + 3_600_000);
    const a = await queue.enqueue('later', {}, { runAt });
    const b = await queue.enqueue('later', {}, { delayMs: 60_000 });
    const { rows } = await sql.query(
      `SELECT id, scheduled_at, extract(epoch FROM scheduled_at - inserted_at) AS delay FROM stampeded_jobs WHERE id = ANY($1)`,
      [[a.id, b.id]],
    );
    const byId = Object.fromEntries(rows.map((r) => [r.id, r]));
    expect(new Date(byId[a.id].scheduled_at).getTime()).toBe(runAt.getTime());
    expect(Number(byId[b.id].delay)).toBeCloseTo(60, 0);
  });

  it('stores each job of a mixed batch as given: what the jobs share is sent once, what differs per job', async () => {
    // Shared by all: task and queue; shared by some: tenant, priority; set on one: destination, meta, runAt.
    const runAt = new Date(Date.now() + 3_600_000);
    const batch = [
      { task: 'mixed', args: { n: 1 }, options: { queue: 'mixed', tenantId: 't1', priority: 2 } },
      { task: 'mixed', args: { n: 2 }, options: { queue: 'mixed', tenantId: 't1', destination: 'api', meta: { k: 'v' } } },
      { task: 'mixed', args: { n: 3 }, options: { queue: 'mixed', priority: 2, runAt } },
      { task: 'mixed', args: { n: 4 }, options: { queue: 'mixed', tenantId: 't2', priority: 2 } },
    ];
    const ids = (await queue.enqueueMany(batch)).map((r) => r.id);
    const { rows } = await sql.query(
      `SELECT id::text, args, tenant_id, priority, destination, meta, scheduled_at > now() + interval '59 minutes' AS later
         FROM stampeded_jobs WHERE id = ANY($1)`,
      [ids],
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    expect(ids.map((id) => byId.get(id))).toEqual([
      { id: ids[0], args: { n: 1 }, tenant_id: 't1', priority: 2, destination: null, meta: {}, later: false },
      { id: ids[1], args: { n: 2 }, tenant_id: 't1', priority: 0, destination: 'api', meta: { nestjs: { k: 'v' } }, later: false },
      { id: ids[2], args: { n: 3 }, tenant_id: null, priority: 2, destination: null, meta: {}, later: true },
      { id: ids[3], args: { n: 4 }, tenant_id: 't2', priority: 2, destination: null, meta: {}, later: false },
    ]);
    // One job alone: everything is shared.
    const [one] = await queue.enqueueMany([{ task: 'mixed', args: { n: 5 }, options: { queue: 'mixed', tenantId: 't3' } }]);
    expect((await sql.query(`SELECT args, tenant_id FROM stampeded_jobs WHERE id = $1`, [one.id])).rows[0]).toEqual({ args: { n: 5 }, tenant_id: 't3' });
  });

  it('stores each job under the id it answered, a UUIDv7 of the database clock, in the order of the batch', async () => {
    const results = await queue.enqueueMany(Array.from({ length: 5000 }, (_, n) => ({ task: 'ids', args: { n }, options: { queue: 'ids' } })));
    const { rows } = await sql.query(
      `SELECT id::text, (args->>'n')::int AS n, uuid_extract_version(id) AS version,
              abs(extract(epoch FROM uuid_extract_timestamp(id) - now())) < 60 AS recent
         FROM stampeded_jobs WHERE queue = 'ids' ORDER BY id`,
    );
    // Every job, under its own id, and id order is batch order.
    expect(rows.map((r) => r.id)).toEqual(results.map((r) => r.id));
    expect(rows.map((r) => r.n)).toEqual(results.map((_, n) => n));
    expect(rows.every((r) => r.version === 7 && r.recent)).toBe(true);
    expect(results.every((r) => r.deduplicated === false)).toBe(true);
    // A later enqueue sorts after the batch, as a later insert would.
    const { id } = await queue.enqueue('ids', { n: -1 }, { queue: 'ids' });
    expect(id > results[results.length - 1].id).toBe(true);
  });

  it('stores a job enqueued alone (its values as parameters) as it stores the same job in a batch (a JSON batch)', async () => {
    const options = {
      queue: 'alone',
      tenantId: 't',
      priority: 3,
      destination: 'api',
      meta: { k: 1 },
      maxAttempts: 7,
      expireSeconds: 60,
      backoff: { baseMs: 10, maxMs: 100 },
      maxInterruptions: 2,
      maxDeferrals: 4,
      deadLetterQueue: 'dlq',
      delayMs: 5000,
    };
    const alone = await queue.enqueue('same', { n: 1 }, options);
    const [batched] = await queue.enqueueMany([
      { task: 'same', args: { n: 1 }, options },
      { task: 'other', args: {}, options: { queue: 'alone' } },
    ]);
    const stored = async (id: string) =>
      (
        await sql.query(
          `SELECT queue, task, args, meta, tenant_id, priority, destination, expire_seconds, max_attempts, backoff_base_ms,
                  backoff_max_ms, max_interruptions, max_deferrals, dead_letter_queue, state,
                  scheduled_at BETWEEN now() + interval '4 seconds' AND now() + interval '6 seconds' AS delayed
             FROM stampeded_jobs WHERE id = $1`,
          [id],
        )
      ).rows[0];
    expect(await stored(alone.id)).toEqual(await stored(batched.id));
    expect((await stored(alone.id)).delayed).toBe(true);
    // runAt the same way.
    const runAt = new Date(Date.now() + 3_600_000);
    const { id } = await queue.enqueue('same', {}, { queue: 'alone', runAt });
    const { rows } = await sql.query(`SELECT scheduled_at FROM stampeded_jobs WHERE id = $1`, [id]);
    expect(rows[0].scheduled_at.getTime()).toBe(runAt.getTime());
  });

  it('stores meta under this runtime key', async () => {
    const { id } = await queue.enqueue('with-meta', {}, { meta: { traceId: 'abc' } });
    const { rows } = await sql.query(`SELECT meta FROM stampeded_jobs WHERE id = $1`, [id]);
    expect(rows[0].meta).toEqual({ nestjs: { traceId: 'abc' } });
  });
});
