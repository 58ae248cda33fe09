import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { InvalidJobError, QueueService, StampededConfigError, Task, type EnqueueOptions, type TaskHandler } from '@stampeded/nestjs';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';
import { WorkerProcess } from '../support/worker-process.js';
import type { TestDatabase } from '@stampeded/testing';

interface Run {
  job_id: string;
  key: string;
  n: number;
  attempt: number;
  started: number;
  ended: number;
}

// Per-key ordering (the orderingKey option): several worker processes claim
// from one queue, and each run is recorded in ordering_runs with its start
// and end drawn from one database sequence (test/fixtures/worker-process/
// ordering.tasks.mjs), so that an overlap or an out-of-order start is seen
// whichever processes ran the jobs.
describe('per-key ordering', () => {
  let db: TestDatabase;
  let sql: pg.Client;
  let app: INestApplicationContext;
  let queue: QueueService;
  const fleet: WorkerProcess[] = [];

  beforeAll(async () => {
    db = await testDatabase();
    // An app that only enqueues (its jobs name the fleet's queue, 'ordered'): the fleet's processes run them.
    app = await bootApp(db.url, { stampeded: { worker: { enabled: false } } });
    queue = app.get(QueueService);
    sql = await sqlClient(db.url);
    await sql.query(`CREATE SEQUENCE ordering_clock`);
    await sql.query(
      `CREATE TABLE ordering_runs (id bigserial PRIMARY KEY, job_id uuid, key text, n int, attempt int, started bigint, ended bigint, ctx_key text)`,
    );
    for (let i = 0; i < 3; i++) {
      fleet.push(
        WorkerProcess.start({
          url: db.url,
          tasks: 'ordering',
          stampeded: { worker: { concurrency: 10, pollIntervalMs: 100 }, maintenance: { enabled: false } },
        }),
      );
    }
    await Promise.all(fleet.map((p) => p.ready()));
  }, 120_000);

  afterAll(async () => {
    await Promise.all(fleet.splice(0).map((p) => p.stop()));
    await app?.close();
    await sql?.end();
    await db?.drop();
  });

  const runsOf = async (key: string): Promise<Run[]> =>
    (await sql.query<Run>(`SELECT job_id::text, key, n, attempt, started::int, ended::int FROM ordering_runs WHERE key = $1 ORDER BY started`, [key])).rows;

  const finished = (ids: string[]) =>
    waitFor(
      async () =>
        (await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE id = ANY($1::uuid[]) AND state IN ('completed','discarded','cancelled')`, [ids]))
          .rows[0].n === ids.length,
      `${ids.length} jobs to finish`,
      30_000,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\n${fleet.map((p) => p.output).join('\n')}`);
    });

  /** Each run ends before the next of its key starts. */
  const expectOneAtATime = (runs: Run[]) => {
    for (let i = 1; i < runs.length; i++) {
      if (!(runs[i - 1].ended < runs[i].started)) {
        throw new Error(`key ${runs[i].key}: run of #${runs[i].n} started at ${runs[i].started} before #${runs[i - 1].n} ended (${runs[i - 1].ended})`);
      }
    }
  };

  const enqueueLine = async (task: string, key: string, jobs: { n: number; failUntil?: number; ms?: number; options?: EnqueueOptions }[]) =>
    queue.enqueueMany(
      jobs.map(({ n, failUntil, ms, options }) => ({ task, args: { key, n, failUntil, ms }, options: { queue: 'ordered', orderingKey: key, ...options } })),
    );

  it('runs the jobs of a key one at a time, in enqueue order, across processes, and different keys side by side', async () => {
    const keys = Array.from({ length: 20 }, (_, k) => `account-${k}`);
    const perKey = 15;
    // Interleaved, as traffic arrives: each batch holds one job of every key;
    // a few more come one call at a time.
    const ids: string[] = [];
    for (let n = 0; n < perKey - 2; n++) {
      const results = await queue.enqueueMany(keys.map((key) => ({ task: 'step', args: { key, n }, options: { queue: 'ordered', orderingKey: key } })));
      ids.push(...results.map((r) => r.id));
    }
    for (let n = perKey - 2; n < perKey; n++) {
      for (const key of keys) ids.push((await queue.enqueue('step', { key, n }, { queue: 'ordered', orderingKey: key })).id);
    }
    await finished(ids);

    for (const key of keys) {
      const runs = await runsOf(key);
      expect(runs.map((r) => r.n)).toEqual(Array.from({ length: perKey }, (_, n) => n));
      expectOneAtATime(runs);
    }
    // Each handler saw its job's key in ctx.orderingKey.
    const { rows: seen } = await sql.query(`SELECT count(*)::int AS n FROM ordering_runs WHERE key = ANY($1) AND ctx_key IS DISTINCT FROM key`, [keys]);
    expect(seen[0].n).toBe(0);
    // Different keys ran at the same time: some run started while a run of another key had not ended.
    const { rows } = await sql.query(
      `SELECT count(*)::int AS n FROM ordering_runs a JOIN ordering_runs b ON a.key <> b.key AND b.started > a.started AND b.started < a.ended`,
    );
    expect(rows[0].n).toBeGreaterThan(0);
  }, 120_000);

  it("keeps a retried job at the front of its key's order: the next job waits through its retries", async () => {
    const jobs = await enqueueLine('step', 'retried', [{ n: 0, failUntil: 3 }, { n: 1 }, { n: 2 }, { n: 3 }]);
    await finished(jobs.map((j) => j.id));
    const runs = await runsOf('retried');
    expect(runs.map((r) => [r.n, r.attempt])).toEqual([
      [0, 1],
      [0, 2],
      [0, 3],
      [1, 1],
      [2, 1],
      [3, 1],
    ]);
    expectOneAtATime(runs);
  }, 120_000);

  it("sends the retry of a task with retryKeepsPlace: false to the back of its key's order", async () => {
    const jobs = await enqueueLine('step-giving-up-place', 'gives-up', [{ n: 0, failUntil: 2 }, { n: 1 }, { n: 2 }, { n: 3 }]);
    await finished(jobs.map((j) => j.id));
    const runs = await runsOf('gives-up');
    expect(runs.map((r) => [r.n, r.attempt])).toEqual([
      [0, 1],
      [1, 1],
      [2, 1],
      [3, 1],
      [0, 2],
    ]);
    expectOneAtATime(runs);
  }, 120_000);

  it('lets the next job of a key run once the one ahead is discarded or cancelled', async () => {
    // Discarded: its one attempt fails.
    const discarded = await enqueueLine('step', 'discarded', [{ n: 0, failUntil: 2, options: { maxAttempts: 1 } }, { n: 1 }, { n: 2 }]);
    await finished(discarded.map((j) => j.id));
    expect((await sql.query(`SELECT state FROM stampeded_jobs WHERE id = $1`, [discarded[0].id])).rows[0].state).toBe('discarded');
    expect((await runsOf('discarded')).map((r) => r.n)).toEqual([0, 1, 2]);

    // Cancelled: the front of its key's order is due in an hour and holds the jobs behind it.
    const held = await enqueueLine('step', 'held', [{ n: 0, options: { delayMs: 3_600_000 } }, { n: 1 }, { n: 2 }]);
    // A job of another key enqueued after them runs.
    const [after] = await enqueueLine('step', 'after-held', [{ n: 0 }]);
    await finished([after.id]);
    // The head is due later; the jobs behind it wait outside the claim index.
    const waiting = await sql.query(`SELECT id::text, state FROM stampeded_jobs WHERE id = ANY($1::uuid[])`, [held.map((j) => j.id)]);
    const stateOf = new Map(waiting.rows.map((r) => [r.id, r.state]));
    expect(held.map((j) => stateOf.get(j.id))).toEqual(['available', 'pending', 'pending']);
    expect(await runsOf('held')).toEqual([]);

    await queue.cancel(held[0].id);
    await finished(held.slice(1).map((j) => j.id));
    const runs = await runsOf('held');
    expect(runs.map((r) => r.n)).toEqual([1, 2]);
    expectOneAtATime(runs);
  }, 120_000);
});

// The claims themselves, by SQL, with the interleavings a fleet only hits by chance.
describe('per-key ordering in the claim', () => {
  let db: TestDatabase;
  let sql: pg.Client;

  beforeAll(async () => {
    db = await testDatabase();
    const app = await bootApp(db.url, { stampeded: { worker: { enabled: false } } });
    await app.close();
    sql = await sqlClient(db.url);
  });

  afterAll(async () => {
    await sql?.end();
    await db?.drop();
  });

  const insertKeyed = (client: pg.Client, key: string, id: string) =>
    client.query(`INSERT INTO stampeded_jobs (id, queue, task, ordering_key, ordering_position) VALUES ($1, 'race', 'noop', $2, $1)`, [id, key]);

  it("takes only the front of each key's order in one claim, in the seed's and the limited claims too", async () => {
    await sql.query(`DELETE FROM stampeded_jobs WHERE queue = 'race'`);
    const ids = Array.from({ length: 6 }, (_, i) => `0190a000-0000-7000-8000-00000000000${i}`);
    for (const [i, id] of ids.entries()) await insertKeyed(sql, i % 2 ? 'odd' : 'even', id);
    await sql.query(`INSERT INTO stampeded_jobs (queue, task) VALUES ('race', 'plain'), ('race', 'plain')`);

    const batch = await sql.query(`SELECT id::text, task FROM stampeded_claim_batch('race', gen_random_uuid(), 100)`);
    expect(
      batch.rows
        .filter((r) => r.task === 'noop')
        .map((r) => r.id)
        .sort(),
    ).toEqual([ids[0], ids[1]]);
    expect(batch.rows.filter((r) => r.task === 'plain')).toHaveLength(2);
    // The heads are running: nothing more of either key.
    expect((await sql.query(`SELECT id FROM stampeded_claim_batch('race', gen_random_uuid(), 100)`)).rows).toEqual([]);
    expect((await sql.query(`SELECT id FROM stampeded_claim('race', gen_random_uuid(), 100)`)).rows).toEqual([]);

    await sql.query(`UPDATE stampeded_jobs SET state = 'completed', finished_at = now(), claimed_by = NULL WHERE id = ANY($1::uuid[])`, [[ids[0], ids[1]]]);
    // A rate-limited queue's claim picks its own candidates, and takes the next heads alone.
    const limited = await sql.query(
      `SELECT (job).id::text AS id FROM stampeded_claim_limited('race', gen_random_uuid(), 100, NULL, '{"queue": {"race": {"limit": 100, "ms": 1000}}}', NULL, NULL)
        WHERE (job).id IS NOT NULL`,
    );
    expect(limited.rows.map((r) => r.id).sort()).toEqual([ids[2], ids[3]]);

    await sql.query(`UPDATE stampeded_jobs SET state = 'completed', finished_at = now(), claimed_by = NULL WHERE id = ANY($1::uuid[])`, [[ids[2], ids[3]]]);
    // Other runtimes call the seed's claim, which takes the last heads the same way.
    const seed = await sql.query(`SELECT id::text FROM stampeded_claim('race', gen_random_uuid(), 100)`);
    expect(seed.rows.map((r) => r.id).sort()).toEqual([ids[4], ids[5]]);
    const fair = await sql.query(`SELECT id::text FROM stampeded_claim_fair('race', gen_random_uuid(), 100, NULL, '{}', 100)`);
    expect(fair.rows).toEqual([]);
  });

  it('refuses a second running job of a key when two claims race for it (the unique index)', async () => {
    await sql.query(`DELETE FROM stampeded_jobs WHERE queue = 'race'`);
    const [first, second] = ['0190b000-0000-7000-8000-000000000001', '0190b000-0000-7000-8000-000000000002'];
    await insertKeyed(sql, 'late', second);
    const enqueuer = await sqlClient(db.url);
    const b = await sqlClient(db.url);
    const c = await sqlClient(db.url);
    try {
      // The job ahead is enqueued in a transaction that commits late.
      await enqueuer.query('BEGIN');
      await insertKeyed(enqueuer, 'late', first);
      // Claim B sees only the second job, and takes it; it has not committed yet.
      await b.query('BEGIN');
      expect((await b.query(`SELECT id::text FROM stampeded_claim_batch('race', gen_random_uuid(), 10)`)).rows).toEqual([{ id: second }]);
      await enqueuer.query('COMMIT');
      // Claim C sees the first job at the head and the second not running yet: it takes the first,
      // and the unique index holds it until B commits, then refuses it.
      const raced = c.query(`SELECT id::text FROM stampeded_claim_batch('race', gen_random_uuid(), 10)`);
      await waitFor(
        async () =>
          (await sql.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`)).rows[0].n > 0,
        'claim C to wait for claim B',
      );
      await b.query('COMMIT');
      await expect(raced).rejects.toMatchObject({ code: '23505', detail: expect.stringMatching(/^Key \(queue, ordering_key\)=\(race, late\)/) });
      // Claimed again, C sees the second job running and takes nothing.
      expect((await c.query(`SELECT id FROM stampeded_claim_batch('race', gen_random_uuid(), 10)`)).rows).toEqual([]);
    } finally {
      await Promise.all([enqueuer.end(), b.end(), c.end()]);
    }
  });
});

describe('per-key ordering: bad input', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await testDatabase();
  });

  afterAll(async () => {
    await db?.drop();
  });

  it('refuses a bad orderingKey before anything is written, and a bad ordering task option at bootstrap', async () => {
    const app = await bootApp(db.url, { stampeded: { worker: { enabled: false } } });
    try {
      const queue = app.get(QueueService);
      await expect(queue.enqueue('x', {}, { orderingKey: '' })).rejects.toThrow(InvalidJobError);
      await expect(queue.enqueue('x', {}, { orderingKey: 42 as never })).rejects.toThrow(/orderingKey must be a non-empty string, got 42/);
      await expect(queue.enqueue('x', {}, { orderingKey: 'k'.repeat(501) })).rejects.toThrow(/orderingKey must be at most 500 characters/);
      await expect(queue.enqueueMany([{ task: 'x', options: { orderingKey: 'a\u0000b' } }])).rejects.toThrow(/orderingKey contains a NUL/);
      const sql = await sqlClient(db.url);
      expect((await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs`)).rows[0].n).toBe(0);
      await sql.end();
    } finally {
      await app.close();
    }

    @Task('badly-ordered', { ordering: { retryKeepsPlace: 'no' as never } })
    class BadlyOrdered implements TaskHandler {
      handle() {}
    }
    await expect(bootApp(db.url, { providers: [BadlyOrdered] })).rejects.toThrow(StampededConfigError);
    await expect(bootApp(db.url, { providers: [BadlyOrdered] })).rejects.toThrow(/ordering\.retryKeepsPlace must be true or false, got "no"/);

    @Task('oddly-ordered', { ordering: { keepPlace: true } as never })
    class OddlyOrdered implements TaskHandler {
      handle() {}
    }
    await expect(bootApp(db.url, { providers: [OddlyOrdered] })).rejects.toThrow(/keepPlace/);
  });
});
