import { DataSource } from 'typeorm';
import { QueueService, type EnqueueResult } from '@stampeded/nestjs';
import { sqlClient, twoEnqueuingApps } from '../support/test-app.js';
import { jobSql } from '../support/job-sql.js';

// Dedup modes replace and extend (docs/enqueue.md, "Debounce"): a duplicate
// changes the waiting job of its scope, never a claimed one (the requests
// that wait behind a claimed one: debounce-follow-up.e2e-spec.ts).
describe('enqueue with a debouncing dedup', () => {
  const h = twoEnqueuingApps();
  const jobs = jobSql(() => h.sql);

  const jobsOf = async (scope: string) =>
    (await h.sql.query(`SELECT id::text, args, meta, state, scheduled_at, inserted_at FROM stampeded_jobs WHERE dedup_scope = $1`, [scope])).rows;

  it('replace: five requests leave one job with the last args, and the meta of other runtimes', async () => {
    const results: EnqueueResult[] = [];
    for (let n = 1; n <= 5; n++) {
      results.push(await h.queue.enqueue('reindex', { user: 42, n }, { meta: { n }, dedup: { scope: 'reindex:42', mode: 'replace' } }));
      // Another runtime's meta key on the job, which a replace must keep.
      if (n === 1) await h.sql.query(`UPDATE stampeded_jobs SET meta = meta || '{"python":{"trace":"t"}}' WHERE id = $1`, [results[0].id]);
    }
    expect(results[0]).toEqual({ id: results[0].id, deduplicated: false });
    for (const result of results.slice(1)) expect(result).toEqual({ id: results[0].id, deduplicated: true, replaced: true });
    const rows = await jobsOf('reindex:42');
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ id: results[0].id, args: { user: 42, n: 5 }, meta: { nestjs: { n: 5 }, python: { trace: 't' } }, state: 'available' });
  });

  it('extend: five requests leave one job with the last args, due its delay after the last request', async () => {
    const dedup = { scope: 'reindex:43', mode: 'extend', delayMs: 60_000 } as const;
    let beforeLast: Date | undefined;
    for (let n = 1; n <= 5; n++) {
      if (n === 5) beforeLast = (await h.sql.query(`SELECT clock_timestamp() AS t`)).rows[0].t;
      await h.queue.enqueue('reindex', { user: 43, n }, { dedup });
    }
    const rows = await jobsOf('reindex:43');
    expect(rows).toHaveLength(1);
    expect(rows[0].args).toEqual({ user: 43, n: 5 });
    const { rows: due } = await h.sql.query(`SELECT scheduled_at >= $2::timestamptz + interval '60 seconds' AS after_last FROM stampeded_jobs WHERE id = $1`, [
      rows[0].id,
      beforeLast,
    ]);
    expect(due[0].after_last).toBe(true);
  });

  it('extend: maxDelayMs caps the push-back from the first request, and past it the job keeps its time', async () => {
    const dedup = { scope: 'capped', mode: 'extend', delayMs: 60_000, maxDelayMs: 120_000 } as const;
    const first = await h.queue.enqueue('reindex', { n: 1 }, { dedup });
    // As if the requests had kept coming for 100 s: the cap is now 20 s away, nearer than a new delay.
    await h.sql.query(
      `UPDATE stampeded_jobs SET inserted_at = inserted_at - interval '100 seconds', scheduled_at = scheduled_at - interval '100 seconds' WHERE id = $1`,
      [first.id],
    );
    await h.queue.enqueue('reindex', { n: 2 }, { dedup });
    const { rows: capped } = await h.sql.query(`SELECT args, scheduled_at = inserted_at + interval '120 seconds' AS at_cap FROM stampeded_jobs WHERE id = $1`, [
      first.id,
    ]);
    expect(capped[0]).toEqual({ args: { n: 2 }, at_cap: true });

    // Past the cap: the newest args still replace, the run time stays.
    await h.sql.query(`UPDATE stampeded_jobs SET inserted_at = inserted_at - interval '1 hour' WHERE id = $1`, [first.id]);
    const runAt = async () => (await h.sql.query(`SELECT scheduled_at::text AS at FROM stampeded_jobs WHERE id = $1`, [first.id])).rows[0].at;
    const before = await runAt();
    const third = await h.queue.enqueue('reindex', { n: 3 }, { dedup });
    expect(third).toEqual({ id: first.id, deduplicated: true, replaced: true });
    expect((await jobsOf('capped'))[0].args).toEqual({ n: 3 });
    expect(await runAt()).toBe(before);
  });

  it('never changes a claimed job: the requests wait behind it as one follow-up, which takes the scope once the job finishes', async () => {
    const dedup = { scope: 'running', mode: 'extend', delayMs: 0 } as const;
    const first = await h.queue.enqueue('reindex', { n: 1 }, { queue: 'debounce-claim', dedup });
    const worker = await jobs.worker();
    const claimed = await jobs.claim('debounce-claim', worker, 10);
    expect(claimed.map((c) => c.id)).toEqual([first.id]);
    const held = async () => (await h.sql.query(`SELECT args, state, scheduled_at::text AS at FROM stampeded_jobs WHERE dedup_scope = 'running'`)).rows;
    const before = await held();

    const during = await h.queue.enqueue('reindex', { n: 2 }, { queue: 'debounce-claim', dedup });
    const [inBatch] = await h.queue.enqueueMany([
      { task: 'reindex', args: { n: 3 }, options: { queue: 'debounce-claim', dedup: { scope: 'running', mode: 'replace' } } },
    ]);
    expect(during).toEqual({ id: during.id, deduplicated: true, replaced: true, runsAfter: first.id });
    expect(inBatch).toEqual({ id: during.id, deduplicated: true, replaced: true, runsAfter: first.id });
    expect(await held()).toEqual(before);
    expect(before).toMatchObject([{ args: { n: 1 }, state: 'executing' }]);

    expect(await jobs.completeMany(worker, claimed)).toEqual([first.id]);
    const next = await h.queue.enqueue('reindex', { n: 4 }, { queue: 'debounce-claim', dedup });
    expect(next).toEqual({ id: during.id, deduplicated: true, replaced: true });
    expect((await jobsOf('running')).map((r) => [r.id, r.args, r.state])).toEqual([[during.id, { n: 4 }, 'available']]);
  });

  it('in enqueueMany: the newest of each scope counts, within the batch and against a waiting job', async () => {
    const dedup = (scope: string) => ({ scope, mode: 'replace' }) as const;
    const results = await h.queue.enqueueMany([
      { task: 'reindex', args: { n: 1 }, options: { dedup: dedup('many-a') } },
      { task: 'reindex', args: { n: 2 }, options: { dedup: dedup('many-b') } },
      { task: 'reindex', args: { n: 3 }, options: { dedup: dedup('many-a') } },
      { task: 'reindex', args: { n: 4 }, options: { dedup: { scope: 'many-c' } } },
      { task: 'reindex', args: { n: 5 }, options: { dedup: dedup('many-a') } },
    ]);
    expect(results.map((r) => [r.deduplicated, r.replaced])).toEqual([
      [false, undefined],
      [false, undefined],
      [true, true],
      [false, undefined],
      [true, true],
    ]);
    expect(results[2].id).toBe(results[0].id);
    expect(results[4].id).toBe(results[0].id);
    expect((await jobsOf('many-a')).map((r) => [r.id, r.args])).toEqual([[results[0].id, { n: 5 }]]);
    expect((await jobsOf('many-b')).map((r) => r.args)).toEqual([{ n: 2 }]);

    const again = await h.queue.enqueueMany([
      { task: 'reindex', args: { n: 6 }, options: { dedup: dedup('many-b') } },
      { task: 'reindex', args: { n: 7 }, options: { dedup: dedup('many-b') } },
    ]);
    expect(again).toEqual([
      { id: results[1].id, deduplicated: true, replaced: true },
      { id: results[1].id, deduplicated: true, replaced: true },
    ]);
    expect((await jobsOf('many-b')).map((r) => r.args)).toEqual([{ n: 7 }]);
  });

  it("joins the caller's transaction: a rollback changes nothing, a commit replaces", async () => {
    const dataSource = h.app.get(DataSource);
    const dedup = { scope: 'in-tx', mode: 'extend', delayMs: 60_000 } as const;
    const first = await h.queue.enqueue('reindex', { n: 1 }, { dedup });
    const before = await jobsOf('in-tx');
    await expect(
      dataSource.transaction(async (manager) => {
        expect(await h.queue.enqueue('reindex', { n: 2 }, { dedup, manager })).toEqual({ id: first.id, deduplicated: true, replaced: true });
        await h.queue.enqueueMany([{ task: 'reindex', args: { n: 3 }, options: { dedup: { scope: 'in-tx-new', mode: 'replace' } } }], { manager });
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(await jobsOf('in-tx')).toEqual(before);
    expect(await jobsOf('in-tx-new')).toEqual([]);

    await dataSource.transaction((manager) => h.queue.enqueue('reindex', { n: 4 }, { dedup, manager }));
    expect((await jobsOf('in-tx')).map((r) => r.args)).toEqual([{ n: 4 }]);
  });

  it('two processes racing debounced enqueues and a claim leave one job per scope, and never change the claimed one', async () => {
    const queues = [h.queue, h.other.get(QueueService)];
    const claimer = await sqlClient(h.db.url);
    try {
      const worker = await jobs.worker();
      for (let round = 0; round < 40; round++) {
        const scope = `race-${round}`;
        const options = (n: number) =>
          ({ queue: `debounce-race-${round}`, dedup: { scope, mode: n % 2 ? 'replace' : 'extend', delayMs: n % 2 ? undefined : 0 } }) as const;
        const requests = Array.from({ length: 8 }, (_, n) => queues[n % 2].enqueue('reindex', { round, n }, options(n)));
        // Every other round, a worker claims the job mid-race, once it exists, and reads its args in the claim's transaction: from then on, nothing may change them.
        const claim = async () => {
          await claimer.query('BEGIN');
          const claimed = await jobs.claim(`debounce-race-${round}`, worker, 1, claimer);
          const args = claimed.length ? (await claimer.query(`SELECT args FROM stampeded_jobs WHERE id = $1`, [claimed[0].id])).rows[0].args : null;
          await claimer.query('COMMIT');
          return { claimed, args };
        };
        const [results, { claimed, args }] = await Promise.all([
          Promise.all(requests),
          round % 2 ? requests[0].then(claim) : Promise.resolve({ claimed: [], args: null }),
        ]);
        const rows = await jobsOf(scope);
        expect(rows).toHaveLength(1);
        // The requests that came after the claim wait behind the claimed job, as its one follow-up.
        const behind = (await h.sql.query(`SELECT id::text FROM stampeded_jobs WHERE dedup_follows = $1`, [rows[0].id])).rows.map((r) => r.id);
        expect(behind.length).toBeLessThanOrEqual(claimed.length);
        expect(new Set(results.map((r) => r.id))).toEqual(new Set([rows[0].id, ...behind]));
        expect(results.filter((r) => !r.deduplicated)).toHaveLength(1);
        if (claimed.length) {
          expect(rows[0]).toMatchObject({ state: 'executing', args });
          await jobs.completeMany(worker, claimed, claimer);
        }
      }
    } finally {
      await claimer.end();
    }
  });
});
