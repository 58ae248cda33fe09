import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { QueueService, SchedulesService, Task, UnrecoverableError, type JobContext, type TaskHandler } from '@stampeded/nestjs';
import { jobSql } from '../support/job-sql.js';
import { bootApp, migratedDatabase, sqlClient, waitFor } from '../support/test-app.js';

// Migration 6: jobs removed on completion, and a claim without the expiry
// index. What they must keep: the fence per job of a batch, exact counters,
// dedup, failures and dead letters.

const ran: string[] = [];

@Task('tidy', { queue: 'tidy', removeOnComplete: true })
class Tidy implements TaskHandler<{ fail?: boolean }> {
  handle(args: { fail?: boolean }, ctx: JobContext) {
    ran.push(ctx.id);
    if (args.fail) throw new UnrecoverableError('refused');
  }
}

@Task('kept', { queue: 'tidy' })
class Kept implements TaskHandler<Record<string, never>> {
  handle(_: Record<string, never>, ctx: JobContext) {
    ran.push(ctx.id);
  }
}

describe('removal on completion', () => {
  const database = migratedDatabase();
  const { worker, claim, completeMany } = jobSql(() => database.sql);
  let sql: pg.Client;
  beforeAll(() => {
    sql = database.sql;
  });

  const insert = async (queue: string, n: number, remove: boolean) =>
    (
      await sql.query(`INSERT INTO stampeded_jobs (queue, task, remove_on_complete) SELECT $1, 'x', $3 FROM generate_series(1, $2) RETURNING id::text`, [
        queue,
        n,
        remove,
      ])
    ).rows.map((r) => r.id as string);
  const rowOf = async (id: string) =>
    (await sql.query(`SELECT state, claimed_by::text, attempt FROM stampeded_jobs WHERE id = $1`, [id])).rows[0] as Record<string, unknown> | undefined;
  const exactCounts = async (queue: string) => {
    const counted = (await sql.query(`SELECT state, n::int FROM stampeded_queue_counts_total WHERE queue = $1 AND n <> 0 ORDER BY state`, [queue])).rows;
    const actual = (await sql.query(`SELECT state, count(*)::int AS n FROM stampeded_jobs WHERE queue = $1 GROUP BY state ORDER BY state`, [queue])).rows;
    expect(counted).toEqual(actual);
    return actual;
  };

  it('removes or completes each job of a mixed batch only while the worker holds its attempt', async () => {
    const a = await worker();
    const b = await worker();
    await insert('mixed', 3, true);
    await insert('mixed', 3, false);
    const claimed = await claim('mixed', a, 6);
    expect(claimed).toHaveLength(6);
    const flagged = new Set((await sql.query(`SELECT id::text FROM stampeded_jobs WHERE queue = 'mixed' AND remove_on_complete`)).rows.map((r) => r.id));
    const removable = claimed.filter((j) => flagged.has(j.id));
    const keepable = claimed.filter((j) => !flagged.has(j.id));
    const [removeMe, removeStale, removeReclaimed] = removable;
    const [keepMe, keepStale, keepReclaimed] = keepable;

    // Lost to the reaper and claimed again by another worker.
    await sql.query(`UPDATE stampeded_jobs SET state = 'retryable', claimed_by = NULL, scheduled_at = now() - interval '1 hour' WHERE id = ANY($1::uuid[])`, [
      [removeReclaimed.id, keepReclaimed.id],
    ]);
    expect((await claim('mixed', b, 2)).map((j) => j.id).sort()).toEqual([removeReclaimed.id, keepReclaimed.id].sort());

    const done = await completeMany(a, [
      removeMe,
      { ...removeStale, attempt: removeStale.attempt - 1 },
      removeReclaimed,
      keepMe,
      { ...keepStale, attempt: keepStale.attempt - 1 },
      keepReclaimed,
    ]);

    expect(done.sort()).toEqual([removeMe.id, keepMe.id].sort());
    expect(await rowOf(removeMe.id)).toBeUndefined();
    expect(await rowOf(keepMe.id)).toMatchObject({ state: 'completed', claimed_by: null });
    // A previous attempt's result is refused, whether the job would be removed or kept.
    expect(await rowOf(removeStale.id)).toMatchObject({ state: 'executing', claimed_by: a, attempt: 1 });
    expect(await rowOf(keepStale.id)).toMatchObject({ state: 'executing', claimed_by: a, attempt: 1 });
    // Another worker's jobs are left to it.
    expect(await rowOf(removeReclaimed.id)).toMatchObject({ state: 'executing', claimed_by: b, attempt: 2 });
    expect(await rowOf(keepReclaimed.id)).toMatchObject({ state: 'executing', claimed_by: b, attempt: 2 });
    expect(await exactCounts('mixed')).toEqual([
      { state: 'completed', n: 1 },
      { state: 'executing', n: 4 },
    ]);
  });

  it('keeps the counters exact while several workers remove and complete batches at once', async () => {
    await sql.query(`SELECT stampeded_create_queue('removing')`);
    await insert('removing', 1500, true);
    await insert('removing', 1500, false);
    const clients = await Promise.all([1, 2, 3, 4].map(() => sqlClient(database.db.url)));
    try {
      await Promise.all(
        clients.map(async (client, n) => {
          const id = (await client.query(`INSERT INTO stampeded_workers (hostname, pid) VALUES ('test', 2) RETURNING id::text`)).rows[0].id;
          for (;;) {
            const jobs = (await client.query(`SELECT id::text, queue, attempt FROM stampeded_claim_batch('removing', $1, $2)`, [id, 29 + n * 7])).rows;
            if (!jobs.length) return;
            expect(await completeMany(id, jobs, client)).toHaveLength(jobs.length);
          }
        }),
      );
    } finally {
      await Promise.all(clients.map((c) => c.end()));
    }
    expect(await exactCounts('removing')).toEqual([{ state: 'completed', n: 1500 }]);
  });

  it('finds the expirer its executing jobs through the claimed index, not a scan of the table', async () => {
    await sql.query(`SELECT stampeded_create_queue('expiring')`);
    await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, state, attempt, finished_at)
       SELECT 'expiring', 'x', 'completed', 1, now() FROM generate_series(1, 50000)`,
    );
    const a = await worker();
    await insert('expiring', 20, false);
    await claim('expiring', a, 20);
    await sql.query(
      `UPDATE stampeded_jobs SET heartbeat_at = now() - interval '2 hours', claimed_at = now() - interval '2 hours' WHERE queue = 'expiring' AND state = 'executing'`,
    );
    await sql.query(`ANALYZE stampeded_jobs_expiring`);
    const plan = (
      await sql.query(
        `EXPLAIN SELECT id FROM stampeded_jobs WHERE state = 'executing'
            AND coalesce(heartbeat_at, claimed_at) < now() - make_interval(secs => expire_seconds) LIMIT 100 FOR UPDATE SKIP LOCKED`,
      )
    ).rows
      .map((r) => r['QUERY PLAN'])
      .join('\n');
    expect(plan).toMatch(/Index Scan on stampeded_jobs_expiring_claimed_by_idx|Index Scan using stampeded_jobs_expiring_claimed_by_idx/);
    expect(plan).not.toMatch(/Seq Scan on stampeded_jobs_expiring/);
    const expired = (await sql.query(`SELECT out_id FROM stampeded_expire(100)`)).rows;
    expect(expired).toHaveLength(20);
    await exactCounts('expiring');
  });

  it('claims from a cursor without walking what a held snapshot keeps alive, in priority order', async () => {
    await sql.query(`SELECT stampeded_create_queue('held')`);
    const holder = await sqlClient(database.db.url);
    try {
      // A snapshot held open: the dead entries every claim leaves at the head of the claim index stay.
      await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await holder.query('SELECT count(*) FROM pg_class');
      const a = await worker();
      await sql.query(
        `INSERT INTO stampeded_jobs (queue, task, scheduled_at) SELECT 'held', 'old', now() - interval '1 minute' FROM generate_series(1, 20000)`,
      );
      for (;;) {
        const jobs = await claim('held', a, 500);
        if (!jobs.length) break;
        await completeMany(a, jobs);
      }
      const [{ cursor }] = (await sql.query(`SELECT (extract(epoch FROM now()) * 1000 - 1000)::float8 AS cursor`)).rows;
      // New work at two priorities, and one job due before the cursor (a past runAt).
      await sql.query(
        `INSERT INTO stampeded_jobs (queue, task, priority, scheduled_at)
         VALUES ('held', 'p5', 5, now()), ('held', 'p0', 0, now()), ('held', 'overdue', 0, now() - interval '30 seconds')`,
      );
      const explain = async (after: number | null) => {
        await sql.query('BEGIN');
        try {
          const [
            {
              'QUERY PLAN': [plan],
            },
          ] = (
            await sql.query(
              `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
               SELECT task FROM stampeded_claim_batch('held', $1, 10, NULL,
                      CASE WHEN $2::float8 IS NULL THEN '-infinity'::timestamptz ELSE to_timestamp($2::float8 / 1000) END)`,
              [a, after],
            )
          ).rows;
          const tasks = (
            await sql.query(`SELECT task FROM stampeded_jobs WHERE queue = 'held' AND state = 'executing' ORDER BY priority, scheduled_at`)
          ).rows.map((r) => r.task);
          return { buffers: plan.Plan['Shared Hit Blocks'] + plan.Plan['Shared Read Blocks'], tasks };
        } finally {
          await sql.query('ROLLBACK');
        }
      };
      // Each claim twice, its fewer buffers kept: a plan made again between
      // the two (autovacuum's ANALYZE of the 20,000 rows invalidates the
      // function's cached plan) reads the catalogs, which is not the walk
      // this measures.
      const leastOfTwo = async (after: number | null) => {
        const [first, second] = [await explain(after), await explain(after)];
        return { tasks: first.tasks, buffers: Math.min(first.buffers, second.buffers) };
      };
      const fromHead = await leastOfTwo(null);
      const fromCursor = await leastOfTwo(cursor);
      expect(fromHead.tasks).toEqual(['overdue', 'p0', 'p5']);
      // Both priorities from the cursor on, the better one first; the overdue job is left to the next full claim.
      expect(fromCursor.tasks).toEqual(['p0', 'p5']);
      // PostgreSQL 18 skips from priority to priority in the claim index; 14 to 17 read less than from the head, not as little.
      const version = Number((await sql.query('SHOW server_version_num')).rows[0].server_version_num);
      expect(fromCursor.buffers * (version >= 180000 ? 5 : 2)).toBeLessThan(fromHead.buffers);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
  });

  it('leaves a claimed job its dedup key, so that a twin is still refused while it runs', async () => {
    // The claim sets dedup_scope to itself (see stampeded_claim_batch's header): the generated key must come out the same.
    await sql.query(`SELECT stampeded_create_queue('keys')`);
    await sql.query(`INSERT INTO stampeded_jobs (queue, task, dedup_scope, dedup_period) VALUES ('keys', 'a', 's1', 'hour'), ('keys', 'b', NULL, NULL)`);
    const keys = async () => (await sql.query(`SELECT task, encode(dedup_key, 'hex') AS key FROM stampeded_jobs WHERE queue = 'keys' ORDER BY task`)).rows;
    const before = await keys();
    expect(before[0].key).toMatch(/^[0-9a-f]{64}$/);
    expect(before[1].key).toBeNull();
    expect(await claim('keys', await worker(), 10)).toHaveLength(2);
    expect(await keys()).toEqual(before);
    await expect(sql.query(`INSERT INTO stampeded_jobs (queue, task, dedup_scope, dedup_period) VALUES ('keys', 'twin', 's1', 'hour')`)).rejects.toThrow(
      /dedup/,
    );
  });

  describe('through the module', () => {
    let app: INestApplicationContext;

    afterAll(async () => {
      await app?.close();
    });

    it('deletes a completed job of a task that asks for it, keeps failures and other jobs, and honours dedup', async () => {
      app = await bootApp(database.db.url, {
        providers: [Tidy, Kept],
        stampeded: { migrations: 'none', worker: { concurrency: 5 }, defaultJobOptions: { maxAttempts: 1 } },
      });
      const queue = app.get(QueueService);

      const removed = await queue.enqueue(Tidy, {});
      const failed = await queue.enqueue(Tidy, { fail: true }, { deadLetterQueue: 'tidy-dead' });
      const overridden = await queue.enqueue(Tidy, {}, { removeOnComplete: false });
      const kept = await queue.enqueue(Kept, {});
      const keptByOption = await queue.enqueue(Kept, {}, { removeOnComplete: true });
      const ids = [removed, failed, overridden, kept, keptByOption].map((r) => r.id);
      await waitFor(() => ids.every((id) => ran.includes(id)), 'every job to run');
      await waitFor(async () => {
        const c = await queue.counts('tidy');
        return c.available + c.executing + c.claimed + c.retryable === 0;
      }, 'every job to finish');

      expect(await queue.getJob(removed.id)).toBeNull();
      expect(await queue.getJob(keptByOption.id)).toBeNull();
      expect(await queue.getJob(overridden.id)).toMatchObject({ state: 'completed' });
      expect(await queue.getJob(kept.id)).toMatchObject({ state: 'completed' });
      // A failure is kept with its error, and its dead letter is made.
      expect(await queue.getJob(failed.id)).toMatchObject({ state: 'discarded', failureKind: 'unrecoverable' });
      const dead = (await sql.query(`SELECT source_id::text FROM stampeded_jobs WHERE queue = 'tidy-dead'`)).rows;
      expect(dead).toEqual([{ source_id: failed.id }]);
      expect(await exactCounts('tidy')).toEqual([
        { state: 'completed', n: 2 },
        { state: 'discarded', n: 1 },
      ]);

      // Dedup: a pending job holds its scope; once removed, the scope is free again, as after a kept completion.
      await app.close();
      app = await bootApp(database.db.url, { providers: [Tidy, Kept], stampeded: { migrations: 'none', worker: { enabled: false } } });
      const producer = app.get(QueueService);
      const first = await producer.enqueue(Tidy, {}, { dedup: { scope: 'once' } });
      const twin = await producer.enqueue(Tidy, {}, { dedup: { scope: 'once' } });
      expect(twin).toEqual({ id: first.id, deduplicated: true });
      await app.close();
      app = await bootApp(database.db.url, { providers: [Tidy, Kept], stampeded: { migrations: 'none', worker: { concurrency: 2 } } });
      await waitFor(() => ran.includes(first.id), 'the deduplicated job to run');
      const worker2 = app.get(QueueService);
      await waitFor(async () => (await worker2.getJob(first.id)) === null, 'the deduplicated job to be removed');
      const next = await worker2.enqueue(Tidy, {}, { dedup: { scope: 'once' } });
      expect(next.deduplicated).toBe(false);
      await waitFor(async () => ran.includes(next.id) && (await worker2.getJob(next.id)) === null, 'the next one to run and be removed');
      await exactCounts('tidy');
    });

    it("gives a scheduled job its task's removeOnComplete, and a redriven dead letter its source's", async () => {
      await app.close();
      app = await bootApp(database.db.url, { providers: [Tidy, Kept], stampeded: { migrations: 'none', worker: { enabled: false } } });
      const flagOf = async (id: string) => (await sql.query(`SELECT remove_on_complete FROM stampeded_jobs WHERE id = $1`, [id])).rows[0]?.remove_on_complete;
      const schedules = app.get(SchedulesService);
      await schedules.upsert({ key: 'tidy-hourly', task: 'tidy', every: '1h' });
      await schedules.upsert({ key: 'kept-hourly', task: 'kept', every: '1h' });
      expect(await flagOf((await schedules.trigger('tidy-hourly')).jobId)).toBe(true);
      expect(await flagOf((await schedules.trigger('kept-hourly')).jobId)).toBe(false);
      // The dead letter of the failed removable job (the test above) goes back to its queue with the option.
      const before = new Set((await sql.query(`SELECT id::text FROM stampeded_jobs WHERE queue = 'tidy'`)).rows.map((r) => r.id));
      expect((await app.get(QueueService).redrive('tidy-dead')).moved).toBe(1);
      const redriven = (await sql.query(`SELECT id::text, remove_on_complete FROM stampeded_jobs WHERE queue = 'tidy'`)).rows.filter((r) => !before.has(r.id));
      expect(redriven).toEqual([expect.objectContaining({ remove_on_complete: true })]);
    });

    it('refuses a removeOnComplete that is not a boolean before anything is written', async () => {
      const queue = app.get(QueueService);
      const before = (await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs`)).rows[0].n;
      await expect(queue.enqueue(Kept, {}, { removeOnComplete: 'yes' as unknown as boolean })).rejects.toThrow(/removeOnComplete.*must be true or false/);
      expect((await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs`)).rows[0].n).toBe(before);
    });
  });
});
