import type { INestApplicationContext } from '@nestjs/common';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { MaintenanceService, QueueService, SchedulesService, Task, UnrecoverableError, migrate, type JobContext, type TaskHandler } from '@stampeded/nestjs';
import { MIGRATION_FILES } from '@stampeded/nestjs/internal';
import { StampededInspector } from '@stampeded/dashboard/inspector';
import { TestClock, drain, type TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase } from '../support/test-app.js';
import { jobSql } from '../support/job-sql.js';

// What every supported PostgreSQL (14 to 18) must do the same: the focused
// suite `npm test` runs on each older major (scripts/run-tests.mjs), and on
// 18 with the rest. What the tests read back is what the server holds.

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

@Task('v-ok', { queue: 'versions' })
class Ok implements TaskHandler<{ n: number }> {
  async handle(args: { n: number }) {
    return { n: args.n };
  }
}

@Task('v-flaky', { queue: 'versions', maxAttempts: 2, backoff: { baseMs: 10, maxMs: 10 }, deadLetterQueue: 'versions-dead' })
class Flaky implements TaskHandler {
  async handle(_args: object, ctx: JobContext) {
    throw new Error(`failed attempt ${ctx.attempt}`);
  }
}

@Task('v-bad', { queue: 'versions' })
class Bad implements TaskHandler {
  async handle() {
    throw new UnrecoverableError('never retried');
  }
}

describe('on this PostgreSQL version', () => {
  let db: TestDatabase;
  let sql: pg.Client;
  let app: INestApplicationContext;
  let queue: QueueService;
  let serverVersionNum: number;

  beforeAll(async () => {
    db = await testDatabase();
    sql = await sqlClient(db.url);
    serverVersionNum = Number((await sql.query(`SELECT current_setting('server_version_num') AS n`)).rows[0].n);
  });

  afterAll(async () => {
    await app?.close();
    await sql?.end();
    await db?.drop();
  });

  /** Every counter row against a count of the jobs themselves. */
  async function expectCountersExact() {
    const { rows } = await sql.query(
      `WITH counted AS (SELECT queue, state, count(*)::bigint AS n FROM stampeded_jobs GROUP BY queue, state),
            kept AS (SELECT queue, state, sum(n)::bigint AS n FROM stampeded_queue_counts GROUP BY queue, state HAVING sum(n) <> 0)
       SELECT coalesce(c.queue, k.queue) AS queue, coalesce(c.state, k.state) AS state, c.n AS counted, k.n AS kept
         FROM counted c FULL JOIN kept k USING (queue, state)
        WHERE c.n IS DISTINCT FROM k.n`,
    );
    expect(rows).toEqual([]);
  }

  it('migrates from empty, recording the forms it chose for this server, and again changes nothing', async () => {
    const applied = await migrate(db.url);
    expect(applied.migrations.map((m) => m.version)).toEqual(MIGRATION_FILES.map((m) => m.version));
    expect(await migrate(db.url)).toEqual({ migrations: [], functions: [] });
    const { rows } = await sql.query(`SELECT DISTINCT server_version_num FROM stampeded_schema_functions`);
    expect(rows.map((r) => r.server_version_num)).toEqual([serverVersionNum]);
    // The install's own uuidv7() exactly where the server has none.
    const { rows: own } = await sql.query(
      `SELECT to_regprocedure('pg_catalog.uuidv7()') IS NOT NULL AS built_in,
              to_regprocedure('public.uuidv7()') IS NOT NULL AS own,
              EXISTS (SELECT 1 FROM stampeded_schema_functions WHERE name = 'uuidv7') AS recorded`,
    );
    expect(own[0]).toEqual({ built_in: serverVersionNum >= 180000, own: serverVersionNum < 180000, recorded: serverVersionNum < 180000 });
  });

  it('draws UUIDv7 ids in the database, in the order they were drawn', async () => {
    const { rows } = await sql.query(`INSERT INTO stampeded_jobs (queue, task) SELECT 'ids', 'x' FROM generate_series(1, 500) RETURNING id::text`);
    const ids = rows.map((r) => r.id as string);
    for (const id of ids) expect(id).toMatch(UUID_V7);
    expect(new Set(ids).size).toBe(500);
    expect([...ids].sort()).toEqual(ids);
    // The timestamp field is the server clock's millisecond.
    const { rows: at } = await sql.query(
      `SELECT abs(('x' || substr(replace($1, '-', ''), 1, 12))::bit(48)::bigint - floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS skew_ms`,
      [ids[499]],
    );
    expect(Number(at[0].skew_ms)).toBeLessThan(60_000);
    await sql.query(`DELETE FROM stampeded_jobs WHERE queue = 'ids'`);
  });

  it('boots, enqueues inside a transaction (a rollback leaves nothing) and deduplicates', async () => {
    app = await bootApp(db.url, { providers: [Ok, Flaky, Bad], stampeded: { worker: { enabled: false }, maintenance: { enabled: false } } });
    queue = app.get(QueueService);
    const dataSource = app.get(DataSource);
    let rolledBack = '';
    await expect(
      dataSource.transaction(async (manager) => {
        rolledBack = (await queue.enqueue('v-ok', { n: 0 }, { manager })).id;
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    let committed = '';
    await dataSource.transaction(async (manager) => {
      committed = (await queue.enqueue('v-ok', { n: 1 }, { manager })).id;
    });
    const { rows } = await sql.query(`SELECT id::text FROM stampeded_jobs WHERE id = ANY($1::uuid[])`, [[rolledBack, committed]]);
    expect(rows.map((r) => r.id)).toEqual([committed]);

    const first = await queue.enqueue('v-ok', { n: 2 }, { dedup: { scope: 'v:2', period: 'hour' } });
    const second = await queue.enqueue('v-ok', { n: 2 }, { dedup: { scope: 'v:2', period: 'hour' } });
    expect(second).toEqual({ id: first.id, deduplicated: true });
    const many = await queue.enqueueMany([
      { task: 'v-ok', args: { n: 3 }, options: { dedup: { scope: 'v:3' } } },
      { task: 'v-ok', args: { n: 3 }, options: { dedup: { scope: 'v:3' } } },
      { task: 'v-ok', args: { n: 2 }, options: { dedup: { scope: 'v:2', period: 'hour' } } },
    ]);
    expect(many.map((r) => r.deduplicated)).toEqual([false, true, true]);
    expect(many[1].id).toBe(many[0].id);
    expect(many[2].id).toBe(first.id);
    for (const r of many) expect(r.id).toMatch(UUID_V7);
    await expectCountersExact();
  });

  it('the worker claims, completes, retries, fails to the dead letter queue and cancels', async () => {
    const flaky = await queue.enqueue('v-flaky', {});
    const bad = await queue.enqueue('v-bad', {});
    const later = await queue.enqueue('v-ok', { n: 9 }, { delayMs: 3_600_000 });
    expect(await queue.cancel(later.id)).toMatchObject({ cancelled: true, previousState: 'available' });
    const result = await drain(app, { queue: 'versions', withScheduled: true });
    expect(result).toMatchObject({ completed: 3, discarded: 2, retrying: 1 });
    const { rows } = await sql.query(
      `SELECT id::text, state, attempt, failure_kind, finished_at IS NOT NULL AS finished FROM stampeded_jobs WHERE queue = 'versions' ORDER BY id`,
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    expect(byId.get(flaky.id)).toMatchObject({ state: 'discarded', attempt: 2, failure_kind: 'raised', finished: true });
    expect(byId.get(bad.id)).toMatchObject({ state: 'discarded', failure_kind: 'unrecoverable' });
    expect(byId.get(later.id)).toMatchObject({ state: 'cancelled', finished: true });
    expect(rows.filter((r) => r.state === 'completed')).toHaveLength(3);
    const { rows: dead } = await sql.query(`SELECT source_id::text FROM stampeded_jobs WHERE queue = 'versions-dead'`);
    expect(dead.map((r) => r.source_id)).toEqual([flaky.id]);
    await expectCountersExact();
  });

  it("runs the seed's own functions for other runtimes: claim, complete, release, checkpoint", async () => {
    const jobs = jobSql(() => sql);
    const worker = await jobs.worker();
    await sql.query(`INSERT INTO stampeded_jobs (queue, task) SELECT 'seedfns', 't' FROM generate_series(1, 3)`);
    const claimed = (await sql.query(`SELECT id::text, attempt FROM stampeded_claim('seedfns', $1, 3)`, [worker])).rows;
    expect(claimed).toHaveLength(3);
    const [a, b, c] = claimed;
    const done = await sql.query(`SELECT * FROM stampeded_complete('seedfns', $1, $2, $3::smallint)`, [a.id, worker, a.attempt]);
    expect(done.rows).toEqual([{ was: 'executing', now_state: 'completed', owned: true }]);
    // Not ours any more: nothing.
    expect((await sql.query(`SELECT * FROM stampeded_complete('seedfns', $1, $2, $3::smallint)`, [a.id, worker, a.attempt])).rows).toEqual([]);
    const released = await sql.query(`SELECT * FROM stampeded_release('seedfns', $1, $2, $3::smallint)`, [b.id, worker, b.attempt]);
    expect(released.rows).toEqual([{ was: 'executing', now_state: 'available', owned: true }]);
    const seq1 = await sql.query(`SELECT stampeded_checkpoint('seedfns', $1, $2, $3::smallint, '{"at": 1}') AS seq`, [c.id, worker, c.attempt]);
    const seq2 = await sql.query(`SELECT stampeded_checkpoint('seedfns', $1, $2, $3::smallint, '{"at": 2}') AS seq`, [c.id, worker, c.attempt]);
    expect([seq1.rows[0].seq, seq2.rows[0].seq]).toEqual([1, 2]);
    const { rows } = await sql.query(`SELECT id::text, state, checkpoint FROM stampeded_jobs WHERE queue = 'seedfns' ORDER BY id`);
    expect(rows.map((r) => [r.id, r.state])).toEqual([
      [a.id, 'completed'],
      [b.id, 'available'],
      [c.id, 'executing'],
    ]);
    expect(rows[2].checkpoint).toEqual({ at: 2 });
    await expectCountersExact();
  });

  it("keeps a key's later jobs waiting outside the claim index; each completion, the seed's too, releases the next; the sweep a stuck one", async () => {
    const jobs = jobSql(() => sql);
    const worker = await jobs.worker();
    const line = await queue.enqueueMany(Array.from({ length: 3 }, (_, n) => ({ task: 'v-ok', args: { n }, options: { queue: 'keyed', orderingKey: 'k' } })));
    const states = async () => (await sql.query(`SELECT state FROM stampeded_jobs WHERE queue = 'keyed' ORDER BY id`)).rows.map((r) => r.state);
    expect(await states()).toEqual(['available', 'pending', 'pending']);
    // The seed's claim and completion, as another runtime calls them.
    const [a] = (await sql.query(`SELECT id::text, attempt FROM stampeded_claim('keyed', $1, 10)`, [worker])).rows;
    expect(a.id).toBe(line[0].id);
    await sql.query(`SELECT * FROM stampeded_complete('keyed', $1, $2, $3::smallint)`, [a.id, worker, a.attempt]);
    expect(await states()).toEqual(['completed', 'available', 'pending']);
    // The worker's claim and batched completion.
    const [b] = await jobs.claim('keyed', worker, 10);
    expect(b.id).toBe(line[1].id);
    await jobs.completeMany(worker, [b]);
    expect(await states()).toEqual(['completed', 'completed', 'available']);
    // A head left waiting with nothing ahead of it: the sweep releases it.
    await sql.query(`UPDATE stampeded_jobs SET state = 'pending' WHERE id = $1`, [line[2].id]);
    expect(await app.get(MaintenanceService).run('ordering')).toMatchObject({ released: 1 });
    expect(await states()).toEqual(['completed', 'completed', 'available']);
    await expectCountersExact();
  });

  it('the reaper gives back the jobs of a dead worker, and the claim cursor finds what is due', async () => {
    const jobs = jobSql(() => sql);
    const worker = await jobs.worker();
    await sql.query(`INSERT INTO stampeded_jobs (queue, task, priority) SELECT 'reaped', 't', g % 3 FROM generate_series(1, 6) g`);
    const claimed = await jobs.claim('reaped', worker, 4);
    expect(claimed).toHaveLength(4);
    await sql.query(`UPDATE stampeded_workers SET last_heartbeat = now() - interval '1 hour' WHERE id = $1`, [worker]);
    const reaped = (await sql.query(`SELECT id::text FROM stampeded_reap(interval '1 minute')`)).rows.map((r) => r.id);
    expect(reaped.sort()).toEqual(claimed.map((c) => c.id).sort());
    const { rows } = await sql.query(`SELECT state, count(*)::int AS n FROM stampeded_jobs WHERE queue = 'reaped' GROUP BY state ORDER BY state`);
    expect(rows).toEqual([
      { state: 'available', n: 2 },
      { state: 'retryable', n: 4 },
    ]);
    // The cursor (p_after): every priority from the bound on, in the claim index's order.
    const other = await jobs.worker();
    const { rows: cursor } = await sql.query(
      `SELECT priority FROM stampeded_claim_batch('reaped', $1, 10, NULL, (SELECT min(scheduled_at) FROM stampeded_jobs WHERE queue = 'reaped'))`,
      [other],
    );
    expect(cursor.map((r) => r.priority).sort()).toEqual([0, 0, 1, 1, 2, 2]);
    const completed = await jobs.completeMany(other, (await sql.query(`SELECT id::text, queue, attempt FROM stampeded_jobs WHERE queue = 'reaped'`)).rows);
    expect(completed).toHaveLength(6);
    await expectCountersExact();
  });

  it('fires a due schedule once', async () => {
    const clock = new TestClock('2026-06-01T00:00:00Z');
    const scheduled = await bootApp(db.url, {
      stampeded: { clock, schedules: { enabled: false }, maintenance: { enabled: false }, worker: { enabled: false } },
    });
    try {
      const schedules = scheduled.get(SchedulesService);
      await schedules.upsert({ key: 'v-every-minute', task: 'v-ok', queue: 'versions', cron: '* * * * *', args: { n: 7 } });
      clock.set('2026-06-01T00:01:30Z');
      const fired = await schedules.fireDue();
      expect(fired.map((f) => f.outcome)).toEqual(['fired']);
      expect(await schedules.fireDue()).toEqual([]);
      const { rows } = await sql.query(
        `SELECT j.task, j.args FROM stampeded_cron_occurrences o JOIN stampeded_jobs j ON j.id = o.job_id WHERE o.cron_key = 'v-every-minute'`,
      );
      expect(rows).toEqual([{ task: 'v-ok', args: { n: 7 } }]);
      await schedules.remove('v-every-minute');
    } finally {
      await scheduled.close();
    }
  });

  it("the dashboard's reads and actions: queues, a job by id without its queue, health, discard", async () => {
    const pool = new pg.Pool({ connectionString: db.url, max: 4 });
    const inspector = new StampededInspector({ schema: 'public', query: async (statement, values) => (await pool.query(statement.text, values)).rows });
    try {
      const waiting = await queue.enqueue('v-ok', { n: 11 }, { delayMs: 3_600_000 });
      expect(await inspector.job(waiting.id)).toMatchObject({ id: waiting.id, state: 'available' });
      expect(await inspector.discard(waiting.id)).toMatchObject({ previousState: 'available', state: 'discarded' });
      expect(await inspector.discard(waiting.id)).toMatchObject({ state: 'discarded' });
      const summary = (await inspector.queues()).find((q) => q.queue === 'versions')!;
      const { rows } = await sql.query(`SELECT state, count(*)::int AS n FROM stampeded_jobs WHERE queue = 'versions' GROUP BY state`);
      for (const { state, n } of rows) expect((summary.counts as Record<string, number>)[state]).toBe(n);
      const health = await inspector.health();
      expect(health.server.num).toBe(serverVersionNum);
    } finally {
      await pool.end();
    }
    await expectCountersExact();
  });
});
