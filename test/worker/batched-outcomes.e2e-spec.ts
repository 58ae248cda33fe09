import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { QueueService, Task, type JobContext, type TaskHandler } from '@stampeded/nestjs';
import { jobSql } from '../support/job-sql.js';
import { nestedPlans } from '../support/plans.js';
import { bootApp, migratedDatabase, sqlClient, waitFor } from '../support/test-app.js';

// Batched claims and completions are where the throughput comes from
// (bench/RESULTS.md); these are the guarantees they must keep.

const runs = new Map<string, number>();

@Task('counted', { queue: 'batched' })
class Counted implements TaskHandler<{ n: number }> {
  handle(_: { n: number }, ctx: JobContext) {
    runs.set(ctx.id, (runs.get(ctx.id) ?? 0) + 1);
  }
}

describe('batched outcomes', () => {
  const database = migratedDatabase();
  // The worker's claim; the seed's stampeded_claim is compared with it below.
  const { worker, claim, completeMany } = jobSql(() => database.sql);
  let sql: pg.Client;
  let db: { url: string };
  beforeAll(() => {
    ({ sql, db } = database);
  });

  const insert = async (queue: string, n: number) =>
    (await sql.query(`INSERT INTO stampeded_jobs (queue, task) SELECT $1, 'x' FROM generate_series(1, $2) RETURNING id::text`, [queue, n])).rows.map(
      (r) => r.id as string,
    );
  const rowOf = async (id: string) => (await sql.query(`SELECT state, claimed_by::text, attempt FROM stampeded_jobs WHERE id = $1`, [id])).rows[0];

  it('records nothing for the jobs of a batch that the worker lost, and completes the rest', async () => {
    const a = await worker();
    const b = await worker();
    await insert('fenced', 6);
    const claimed = await claim('fenced', a, 6);
    expect(claimed).toHaveLength(6);
    const [kept1, reaped, reclaimed, stale, kept2, cancelled] = claimed;

    // Lost to the reaper and waiting for its retry.
    await sql.query(`UPDATE stampeded_jobs SET state = 'retryable', claimed_by = NULL, failure_kind = 'worker_missing' WHERE id = $1`, [reaped.id]);
    // Lost to the reaper and already claimed again, by another worker.
    await sql.query(`UPDATE stampeded_jobs SET state = 'retryable', claimed_by = NULL, scheduled_at = now() - interval '1 hour' WHERE id = $1`, [reclaimed.id]);
    const again = await claim('fenced', b, 1);
    expect(again.map((j) => j.id)).toEqual([reclaimed.id]);
    // Cancelled while it ran.
    await sql.query(`SELECT stampeded_cancel($1)`, [cancelled.id]);

    const done = await completeMany(a, [kept1, reaped, reclaimed, { ...stale, attempt: stale.attempt - 1 }, kept2, cancelled]);

    expect(done.sort()).toEqual([kept1.id, kept2.id].sort());
    expect(await rowOf(kept1.id)).toMatchObject({ state: 'completed', claimed_by: null });
    expect(await rowOf(kept2.id)).toMatchObject({ state: 'completed', claimed_by: null });
    expect(await rowOf(reaped.id)).toMatchObject({ state: 'retryable', claimed_by: null });
    expect(await rowOf(reclaimed.id)).toMatchObject({ state: 'executing', claimed_by: b, attempt: 2 });
    // A previous attempt's result is refused even from the worker that holds the job.
    expect(await rowOf(stale.id)).toMatchObject({ state: 'executing', claimed_by: a, attempt: 1 });
    expect(await rowOf(cancelled.id)).toMatchObject({ state: 'cancelled' });
  });

  it('keeps the counters exact while several workers claim and complete batches at once', async () => {
    await sql.query(`SELECT stampeded_create_queue('contended')`);
    await insert('contended', 2000);
    const clients = await Promise.all([1, 2, 3, 4].map(() => sqlClient(db.url)));
    try {
      await Promise.all(
        clients.map(async (client) => {
          const id = (await client.query(`INSERT INTO stampeded_workers (hostname, pid) VALUES ('test', 2) RETURNING id::text`)).rows[0].id;
          for (;;) {
            const jobs = (await client.query(`SELECT id::text, queue, attempt FROM stampeded_claim_batch('contended', $1, 37)`, [id])).rows;
            if (!jobs.length) return;
            await client.query(`SELECT id FROM stampeded_complete_many($1, $2::text[], $3::uuid[], $4::smallint[])`, [
              id,
              jobs.map((j) => j.queue),
              jobs.map((j) => j.id),
              jobs.map((j) => j.attempt),
            ]);
          }
        }),
      );
    } finally {
      await Promise.all(clients.map((c) => c.end()));
    }
    const counted = (await sql.query(`SELECT state, n::int FROM stampeded_queue_counts_total WHERE queue = 'contended' AND n <> 0 ORDER BY state`)).rows;
    const actual = (await sql.query(`SELECT state, count(*)::int AS n FROM stampeded_jobs WHERE queue = 'contended' GROUP BY state ORDER BY state`)).rows;
    expect(counted).toEqual(actual);
    expect(actual).toEqual([{ state: 'completed', n: 2000 }]);
  });

  it("claims what the seed's claim would, in the same order, with the same changes to each row", async () => {
    await sql.query(`SELECT stampeded_create_queue('same')`);
    // Priorities, due times, a job not yet due, one out of attempts, one with a full attempted_by ring.
    await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, priority, scheduled_at, attempt, max_attempts, attempted_by)
       SELECT 'same', 't' || g, (g % 3)::smallint, now() - make_interval(secs => g),
              CASE WHEN g = 7 THEN 3 ELSE 0 END, CASE WHEN g = 7 THEN 3 ELSE 25 END,
              CASE WHEN g = 5 THEN ARRAY['a','b','c','d','e','f','g','h','i','j'] ELSE '{}' END
         FROM generate_series(1, 12) g`,
    );
    await sql.query(`INSERT INTO stampeded_jobs (queue, task, scheduled_at) VALUES ('same', 'later', now() + interval '1 hour')`);
    const snapshot = async () =>
      (
        await sql.query(
          `SELECT id::text, state, attempt, claimed_by::text, attempted_by, heartbeat_at = claimed_at AS seeded FROM stampeded_jobs WHERE queue = 'same' ORDER BY id`,
        )
      ).rows;

    const a = await worker();
    await sql.query('BEGIN');
    const bySeed = (await sql.query(`SELECT id::text FROM stampeded_claim('same', $1, 8)`, [a])).rows.map((r) => r.id);
    const seedRows = await snapshot();
    await sql.query('ROLLBACK');
    const byBatch = (await sql.query(`SELECT id::text FROM stampeded_claim_batch('same', $1, 8)`, [a])).rows.map((r) => r.id);

    expect(byBatch.sort()).toEqual(bySeed.sort());
    expect(await snapshot()).toEqual(seedRows);
    // The rest: eleven of twelve were claimable (one is out of attempts), and the one not yet due is not.
    const rest = (await sql.query(`SELECT task FROM stampeded_claim_batch('same', $1, 100)`, [a])).rows.map((r) => r.task);
    expect(rest.sort()).toEqual(['t2', 't5', 't8']);
    // A full ring of ten attempts drops the oldest.
    const ring = (await sql.query(`SELECT attempted_by FROM stampeded_jobs WHERE queue = 'same' AND task = 't5'`)).rows[0].attempted_by;
    expect(ring).toEqual(['b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', a]);
  });

  it('finds the rows of a claim and of a completion through the primary key, however large the queue', async () => {
    // The plans inside the functions, as auto_explain prints them: a claim
    // joined to its candidates by a hash join over the whole partition, and a
    // completion comparing each row with each id, grew with the table.
    await sql.query(`SELECT stampeded_create_queue('planned')`);
    await insert('planned', 20_000);
    await sql.query(`ANALYZE stampeded_jobs_planned`);
    const plans = await nestedPlans(sql, async () => {
      const a = await worker();
      const jobs = await claim('planned', a, 500);
      expect(jobs).toHaveLength(500);
      expect(await completeMany(a, jobs)).toHaveLength(500);
    });
    // The plan of the claim's UPDATE, not of the advisory lock before it (stampeded_claim_batch's): both show the whole body as their text.
    const claimPlan = plans.find((p) => p.includes("state        = 'executing'") && p.includes('Update on'));
    const completionPlan = plans.find((p) => p.includes("state       = 'completed'"));
    expect(claimPlan).toBeDefined();
    expect(completionPlan).toBeDefined();
    for (const plan of [claimPlan!, completionPlan!]) {
      expect(plan).toMatch(/(Index Scan using|Bitmap Index Scan on) stampeded_jobs_planned_pkey/);
      expect(plan).not.toMatch(/Seq Scan on stampeded_jobs_planned/);
      expect(plan).not.toMatch(/Nested Loop/);
    }
    // A batch with nothing to remove is one statement: no DELETE looks its rows up again.
    expect(plans.filter((p) => /Delete on stampeded_jobs/.test(p))).toEqual([]);
  });

  describe('a worker claiming ahead in batches', () => {
    let app: INestApplicationContext;

    afterAll(async () => {
      await app?.close();
    });

    it('runs every job exactly once and completes each, with the counters exact', async () => {
      app = await bootApp(db.url, { providers: [Counted], stampeded: { migrations: 'none', worker: { concurrency: 20 } } });
      const queue = app.get(QueueService);
      const ids = (await queue.enqueueMany(Array.from({ length: 3000 }, (_, n) => ({ task: 'counted', args: { n } })))).map((r) => r.id);
      await waitFor(async () => (await queue.counts('batched')).completed === ids.length, 'every job to be completed', 60_000);
      expect(ids.filter((id) => runs.get(id) !== 1)).toEqual([]);
      const states = (await sql.query(`SELECT state, count(*)::int AS n, max(attempt) AS attempts FROM stampeded_jobs WHERE queue = 'batched' GROUP BY state`))
        .rows;
      expect(states).toEqual([{ state: 'completed', n: 3000, attempts: 1 }]);
      expect(await queue.counts('batched')).toMatchObject({ completed: 3000, executing: 0, available: 0 });
    });
  });
});
