import type { INestApplicationContext } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type pg from 'pg';
import { QueueService, type EnqueueResult } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase, twoEnqueuingApps } from '../support/test-app.js';
import { jobSql, type ClaimedRow } from '../support/job-sql.js';
import { WorkerProcess } from '../support/worker-process.js';

// A debounced request that finds its scope's job claimed or running waits
// behind it as the scope's one follow-up, released by that job's outcome
// (docs/enqueue.md, "Debounce"): nothing a user enqueued is dropped.
describe('debounce: a request while the job runs', () => {
  const h = twoEnqueuingApps();
  const jobs = jobSql(() => h.sql);

  /** Every job a scope ever had, holder or follow-up, oldest first. */
  const scopeJobs = async (scope: string) =>
    (
      await h.sql.query(
        `SELECT id::text, args, state, dedup_scope, dedup_follows::text AS follows, scheduled_at <= now() AS due
           FROM stampeded_jobs WHERE dedup_scope = $1 OR dedup_follow_scope = $1 OR args->>'scope' = $1 ORDER BY id`,
        [scope],
      )
    ).rows;

  /** A job of the scope claimed by a fresh worker row, as a worker claims it. */
  async function running(scope: string, options: { maxAttempts?: number } = {}) {
    const q = `follow-${scope}`;
    const first = await h.queue.enqueue('reindex', { scope, n: 0 }, { queue: q, maxAttempts: options.maxAttempts, dedup: { scope, mode: 'replace' } });
    const worker = await jobs.worker();
    const claimed = await jobs.claim(q, worker, 10);
    expect(claimed.map((c) => c.id)).toEqual([first.id]);
    return { q, first, worker, claimed };
  }

  it('waits as one follow-up with the newest args, released when the running job completes', async () => {
    const { q, first, worker, claimed } = await running('complete');
    const during: EnqueueResult[] = [];
    during.push(await h.queue.enqueue('reindex', { scope: 'complete', n: 1 }, { queue: q, dedup: { scope: 'complete', mode: 'replace' } }));
    during.push(
      ...(await h.queue.enqueueMany([
        { task: 'reindex', args: { scope: 'complete', n: 2 }, options: { queue: q, dedup: { scope: 'complete', mode: 'extend', delayMs: 0 } } },
        { task: 'reindex', args: { scope: 'complete', n: 3 }, options: { queue: q, dedup: { scope: 'complete', mode: 'replace' } } },
      ])),
    );
    const followUp = during[0].id;
    expect(followUp).not.toBe(first.id);
    for (const result of during) expect(result).toEqual({ id: followUp, deduplicated: true, replaced: true, runsAfter: first.id });
    expect(await scopeJobs('complete')).toEqual([
      { id: first.id, args: { scope: 'complete', n: 0 }, state: 'executing', dedup_scope: 'complete', follows: null, due: true },
      { id: followUp, args: { scope: 'complete', n: 3 }, state: 'pending', dedup_scope: null, follows: first.id, due: true },
    ]);

    expect(await jobs.completeMany(worker, claimed)).toEqual([first.id]);
    expect((await scopeJobs('complete')).map((j) => [j.id, j.state, j.dedup_scope, j.follows])).toEqual([
      [first.id, 'completed', null, null],
      [followUp, 'available', 'complete', null],
    ]);
    // Released, the follow-up is the scope's waiting job: the next request replaces its args.
    expect(await h.queue.enqueue('reindex', { scope: 'complete', n: 4 }, { queue: q, dedup: { scope: 'complete', mode: 'replace' } })).toEqual({
      id: followUp,
      deduplicated: true,
      replaced: true,
    });
  });

  it('a job that will retry keeps its follow-up, which the requests replace; its final failure releases it', async () => {
    const { q, first, worker, claimed } = await running('fail', { maxAttempts: 2 });
    const dedup = { scope: 'fail', mode: 'replace' } as const;
    const followUp = await h.queue.enqueue('reindex', { scope: 'fail', n: 1 }, { queue: q, dedup });
    const fail = (row: ClaimedRow) =>
      h.sql.query(`SELECT * FROM stampeded_fail($1, $2, $3, $4::smallint, 'raised', 'boom', 0)`, [row.queue, row.id, worker, row.attempt]);

    await fail(claimed[0]);
    // Waiting to retry, the job still holds the scope; the request goes to the follow-up, not to the retry.
    const again = await h.queue.enqueue('reindex', { scope: 'fail', n: 2 }, { queue: q, dedup });
    expect(again).toEqual({ id: followUp.id, deduplicated: true, replaced: true, runsAfter: first.id });
    expect((await scopeJobs('fail')).map((j) => [j.state, j.args.n])).toEqual([
      ['retryable', 0],
      ['pending', 2],
    ]);

    const [retry] = await jobs.claim(q, worker, 10);
    expect(retry.id).toBe(first.id);
    await fail(retry);
    expect((await scopeJobs('fail')).map((j) => [j.id, j.state, j.dedup_scope])).toEqual([
      [first.id, 'discarded', null],
      [followUp.id, 'available', 'fail'],
    ]);
  });

  it('cancel of the running job, an operator discard of the waiting one, and the reaper release the follow-up', async () => {
    const dedup = (scope: string) => ({ scope, mode: 'replace' }) as const;

    const cancelled = await running('cancel');
    const behindCancelled = await h.queue.enqueue('reindex', { scope: 'cancel', n: 1 }, { queue: cancelled.q, dedup: dedup('cancel') });
    await h.queue.cancel(cancelled.first.id);
    expect((await scopeJobs('cancel')).map((j) => [j.id, j.state, j.dedup_scope])).toEqual([
      [cancelled.first.id, 'cancelled', null],
      [behindCancelled.id, 'available', 'cancel'],
    ]);

    const discarded = await running('discard', { maxAttempts: 3 });
    const behindDiscarded = await h.queue.enqueue('reindex', { scope: 'discard', n: 1 }, { queue: discarded.q, dedup: dedup('discard') });
    await h.sql.query(`SELECT * FROM stampeded_fail($1, $2, $3, $4::smallint, 'raised', 'boom', 60000)`, [
      discarded.q,
      discarded.first.id,
      discarded.worker,
      discarded.claimed[0].attempt,
    ]);
    await h.sql.query(`SELECT * FROM stampeded_discard($1, $2, 'dropped by an operator')`, [discarded.first.id, discarded.q]);
    expect((await scopeJobs('discard')).map((j) => [j.id, j.state, j.dedup_scope])).toEqual([
      [discarded.first.id, 'discarded', null],
      [behindDiscarded.id, 'available', 'discard'],
    ]);

    const reaped = await running('reap', { maxAttempts: 1 });
    const behindReaped = await h.queue.enqueue('reindex', { scope: 'reap', n: 1 }, { queue: reaped.q, dedup: dedup('reap') });
    await h.sql.query(`UPDATE stampeded_workers SET last_heartbeat = now() - interval '1 hour' WHERE id = $1`, [reaped.worker]);
    await h.sql.query(`SELECT * FROM stampeded_reap(interval '1 minute')`);
    expect((await scopeJobs('reap')).map((j) => [j.id, j.state, j.dedup_scope])).toEqual([
      [reaped.first.id, 'discarded', null],
      [behindReaped.id, 'available', 'reap'],
    ]);
  });

  it("joins the caller's transaction, whose commit the running job's outcome waits for", async () => {
    const dataSource = h.app.get(DataSource);
    const { q, first, worker, claimed } = await running('tx');
    const dedup = { scope: 'tx', mode: 'extend', delayMs: 0 } as const;
    await expect(
      dataSource.transaction(async (manager) => {
        await h.queue.enqueue('reindex', { scope: 'tx', n: 1 }, { queue: q, dedup, manager });
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect((await scopeJobs('tx')).map((j) => j.id)).toEqual([first.id]);

    // The job finishes while the transaction that asked for its follow-up is still open: the outcome waits for its commit and then releases it.
    const completer = await sqlClient(h.db.url);
    try {
      let completed: Promise<string[]> | undefined;
      let followUp: EnqueueResult | undefined;
      await dataSource.transaction(async (manager) => {
        followUp = await h.queue.enqueue('reindex', { scope: 'tx', n: 2 }, { queue: q, dedup, manager });
        completed = jobs.completeMany(worker, claimed, completer);
        const deadline = Date.now() + 10_000;
        const waiting = async () =>
          (
            await h.sql.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`, [
              (completer as unknown as { processID: number }).processID,
            ])
          ).rowCount;
        while (!(await waiting())) {
          if (Date.now() > deadline) throw new Error('the completion never waited for the enqueue');
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      });
      expect(await completed).toEqual([first.id]);
      expect(followUp).toEqual({ id: followUp!.id, deduplicated: true, replaced: true, runsAfter: first.id });
      expect((await scopeJobs('tx')).map((j) => [j.id, j.state, j.dedup_scope, j.args.n])).toEqual([
        [first.id, 'completed', null, 0],
        [followUp!.id, 'available', 'tx', 2],
      ]);
    } finally {
      await completer.end();
    }
  });

  it('requests racing from two processes, and the running job finishing among them, leave one job with the last args', async () => {
    const queues = [h.queue, h.other.get(QueueService)];
    for (let round = 0; round < 20; round++) {
      const scope = `race-${round}`;
      const { q, first, worker, claimed } = await running(scope);
      const options = (n: number) => ({ queue: q, dedup: n % 2 ? { scope, mode: 'replace' as const } : { scope, mode: 'extend' as const, delayMs: 0 } });
      const requests = Array.from({ length: 8 }, (_, n) => queues[n % 2].enqueue('reindex', { scope, n: n + 1 }, options(n)));
      // Every other round the running job completes in the middle of the requests.
      const [results] = await Promise.all([Promise.all(requests), round % 2 ? requests[2].then(() => jobs.completeMany(worker, claimed)) : null]);
      const last = await h.queue.enqueue('reindex', { scope, n: 9 }, options(9));
      const rows = await scopeJobs(scope);
      // The running job, and one job after it, whatever the order in which the requests and the completion landed.
      expect(rows.map((j) => j.id)).toEqual([first.id, last.id]);
      expect(rows[1].args).toEqual({ scope, n: 9 });
      for (const result of [...results, last]) expect(result).toMatchObject({ id: last.id, deduplicated: true, replaced: true });
      if (round % 2 === 0) {
        expect(rows.map((j) => j.state)).toEqual(['executing', 'pending']);
        await jobs.completeMany(worker, claimed);
      }
      expect((await scopeJobs(scope)).map((j) => [j.state, j.dedup_scope])).toEqual([
        ['completed', null],
        ['available', scope],
      ]);
    }
  });
});

// The same across a fleet: processes of their own run the jobs, two apps enqueue.
describe('debounce follow-ups across worker processes', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let other: INestApplicationContext;
  let sql: pg.Client;
  const fleet: WorkerProcess[] = [];

  beforeAll(async () => {
    db = await testDatabase();
    app = await bootApp(db.url, { stampeded: { worker: { enabled: false } } });
    other = await bootApp(db.url, { via: 'connection', stampeded: { worker: { enabled: false } } });
    sql = await sqlClient(db.url);
    await sql.query(`CREATE SEQUENCE debounce_clock`);
    await sql.query(`CREATE TABLE debounce_runs (id bigserial PRIMARY KEY, job_id uuid, scope text, n int, started bigint, ended bigint)`);
    await sql.query(`CREATE TABLE debounce_gates (scope text PRIMARY KEY, closed boolean NOT NULL)`);
    for (let i = 0; i < 3; i++) {
      fleet.push(
        WorkerProcess.start({
          url: db.url,
          tasks: 'debounce',
          stampeded: { worker: { concurrency: 5, pollIntervalMs: 100 }, maintenance: { enabled: false } },
        }),
      );
    }
    await Promise.all(fleet.map((p) => p.ready()));
  }, 120_000);

  afterAll(async () => {
    await Promise.all(fleet.splice(0).map((p) => p.stop()));
    await sql?.end();
    await other?.close();
    await app?.close();
    await db?.drop();
  });

  async function until<T>(what: string, read: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await read();
      if (value !== undefined) return value;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  const runs = async (scope: string) =>
    (await sql.query(`SELECT job_id::text, n, started, ended FROM debounce_runs WHERE scope = $1 ORDER BY started`, [scope])).rows;

  it('requests while the job runs give exactly one more run, with the newest args, after it', async () => {
    const queues = [app.get(QueueService), other.get(QueueService)];
    const scopes = ['fleet-a', 'fleet-b', 'fleet-c'];
    const options = (scope: string, n: number) => ({
      queue: 'debounce-fleet',
      dedup: n % 2 ? { scope, mode: 'replace' as const } : { scope, mode: 'extend' as const, delayMs: 0 },
    });
    for (const scope of scopes) await sql.query(`INSERT INTO debounce_gates VALUES ($1, true)`, [scope]);
    const firsts = await Promise.all(scopes.map((scope) => queues[0].enqueue('reindex', { scope, n: 0 }, options(scope, 0))));
    for (const scope of scopes) await until(`${scope}'s first run`, async () => ((await runs(scope)).length ? true : undefined));

    const during = await Promise.all(
      scopes.flatMap((scope) => Array.from({ length: 10 }, (_, n) => queues[n % 2].enqueue('reindex', { scope, n: n + 1 }, options(scope, n + 1)))),
    );
    const newest = await Promise.all(scopes.map((scope) => queues[1].enqueue('reindex', { scope, n: 11 }, options(scope, 11))));
    scopes.forEach((scope, i) => {
      const mine = [...during.slice(i * 10, i * 10 + 10), newest[i]];
      for (const result of mine) expect(result).toEqual({ id: newest[i].id, deduplicated: true, replaced: true, runsAfter: firsts[i].id });
    });
    await sql.query(`UPDATE debounce_gates SET closed = false`);

    for (const [i, scope] of scopes.entries()) {
      const done = await until(`${scope}'s runs`, async () => {
        const rows = await runs(scope);
        return rows.length === 2 && rows.every((r) => r.ended !== null) ? rows : undefined;
      });
      expect(done.map((r) => [r.job_id, r.n])).toEqual([
        [firsts[i].id, 0],
        [newest[i].id, 11],
      ]);
      // One after the other, never side by side.
      expect(Number(done[0].ended)).toBeLessThan(Number(done[1].started));
      await until(`${scope}'s follow-up to complete`, async () => {
        const { rows } = await sql.query(`SELECT state FROM stampeded_jobs WHERE id = $1`, [newest[i].id]);
        return rows[0]?.state === 'completed' ? true : undefined;
      });
      expect((await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE args->>'scope' = $1`, [scope])).rows[0].n).toBe(2);
    }
    // Nothing ran a third time.
    expect((await sql.query(`SELECT count(*)::int AS n FROM debounce_runs`)).rows[0].n).toBe(6);
  }, 90_000);
});
