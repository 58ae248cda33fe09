import type pg from 'pg';
import { migrate } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { sqlClient, testDatabase, waitFor } from '../support/test-app.js';
import { WorkerProcess, type WorkerProcessConfig } from '../support/worker-process.js';

const LONG = process.env.STAMPEDED_CONTROL_LONG === '1';

describe('queue control: rate limits per queue, task, tenant and destination, for the whole fleet', () => {
  let db: TestDatabase;
  let sql: pg.Client;
  const fleet: WorkerProcess[] = [];

  beforeAll(async () => {
    db = await testDatabase();
    await migrate(db.url);
    sql = await sqlClient(db.url);
  });

  afterEach(async () => {
    await Promise.all(fleet.splice(0).map((p) => p.stop()));
    await sql.query(`DELETE FROM stampeded_jobs; DELETE FROM stampeded_rate_limits; DELETE FROM stampeded_workers`);
  });

  afterAll(async () => {
    await sql?.end();
    await db?.drop();
  });

  function start(config: Pick<WorkerProcessConfig, 'stampeded' | 'queues'>): WorkerProcess {
    const p = WorkerProcess.start({ url: db.url, tasks: 'control', ...config, stampeded: { migrations: 'auto', ...config.stampeded } });
    fleet.push(p);
    return p;
  }

  /** Processes that provision the same queue's partition at the same moment race (QueueRegistry.provision): one first. */
  async function startFleet(n: number, config: Pick<WorkerProcessConfig, 'stampeded' | 'queues'>): Promise<WorkerProcess[]> {
    const first = start(config);
    await first.ready();
    const rest = Array.from({ length: n - 1 }, () => start(config));
    await Promise.all(rest.map((w) => w.ready()));
    return [first, ...rest];
  }

  /**
   * The most jobs claimed in any window of `ms` (selected by `where`): the
   * windows that end at a claim are the fullest, so one per claimed job.
   */
  async function mostInAnyWindow(where: string, ms: number, params: unknown[] = []): Promise<number> {
    const { rows } = await sql.query(
      `WITH s AS (SELECT claimed_at FROM stampeded_jobs WHERE claimed_at IS NOT NULL AND ${where})
       SELECT coalesce(max((SELECT count(*) FROM s s2
                             WHERE s2.claimed_at > s1.claimed_at - make_interval(secs => ${ms / 1000})
                               AND s2.claimed_at <= s1.claimed_at)), 0)::int AS n
         FROM s s1`,
      params,
    );
    return rows[0].n;
  }

  it(
    'holds 100 starts a second on a queue across four worker processes, spends no attempt on the waiting jobs, and starves no other queue',
    async () => {
      const total = LONG ? 2000 : 400;
      const plain = 300;
      const stampeded = {
        worker: { concurrency: 10 },
        control: { rateLimits: { queues: { limited: { limit: 100, per: '1s' } } } },
      };
      const queues = [{ name: 'limited' }, { name: 'plain' }];
      await startFleet(4, { stampeded, queues });
      await sql.query(
        `INSERT INTO stampeded_jobs (queue, task)
         SELECT 'limited', 'limited-work' FROM generate_series(1, ${total})
         UNION ALL SELECT 'plain', 'plain-work' FROM generate_series(1, ${plain})`,
      );

      const count = async (queue: string) =>
        (await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE queue = $1 AND state = 'completed'`, [queue])).rows[0].n as number;
      // The other queue drains while the limited one still waits for its windows.
      await waitFor(async () => (await count('plain')) === plain, 'the plain queue to drain', 30_000, 20);
      const limitedDoneWhenPlainDrained = await count('limited');
      await waitFor(async () => (await count('limited')) === total, 'the limited queue to drain', LONG ? 120_000 : 60_000, 50);

      const most = await mostInAnyWindow(`queue = 'limited'`, 1000);
      const { rows } = await sql.query(
        `SELECT max(attempt)::int AS attempts, max(deferrals)::int AS deferrals,
                extract(epoch FROM max(claimed_at) - min(claimed_at))::float8 AS span
           FROM stampeded_jobs WHERE queue = 'limited'`,
      );
      process.stderr.write(
        `rate limit 100/s, 4 processes x concurrency 10, ${total} jobs: at most ${most} started in any 1 s window, ` +
          `claims spread over ${rows[0].span.toFixed(2)} s; ${plain} plain jobs drained with ${limitedDoneWhenPlainDrained} limited ones done\n`,
      );
      // Exact: the claim counts the window under the key's lock.
      expect(most).toBeLessThanOrEqual(100);
      // The limit is used, not merely respected: some window is full.
      expect(most).toBeGreaterThanOrEqual(90);
      // The waiting jobs were never claimed: one attempt each, no deferral.
      expect(rows[0]).toMatchObject({ attempts: 1, deferrals: 0 });
      expect(limitedDoneWhenPlainDrained).toBeLessThan(total);
    },
    LONG ? 300_000 : 120_000,
  );

  /** The most of `times` (ms) in any window of `ms`: the windows that end at a time are the fullest, so one per time. */
  function mostInAnyWindowOf(times: number[], ms: number): number {
    const sorted = [...times].sort((a, b) => a - b);
    let most = 0;
    for (let end = 0, first = 0; end < sorted.length; end++) {
      while (sorted[first] <= sorted[end] - ms) first++;
      most = Math.max(most, end - first + 1);
    }
    return most;
  }

  it('holds 50 handler starts a second across four worker processes, counted where the handlers start', async () => {
    const total = 400;
    const stampeded = {
      worker: { concurrency: 25 },
      control: { rateLimits: { queues: { paced: { limit: 50, per: '1s' } } } },
    };
    const workers = await startFleet(4, { stampeded, queues: [{ name: 'paced' }] });
    // All at once: every window opens on a full queue, and the fleet's claims meet at its edges.
    await sql.query(`INSERT INTO stampeded_jobs (queue, task) SELECT 'paced', 'paced-call' FROM generate_series(1, ${total})`);

    const started = () => workers.flatMap((w) => w.events.filter((e) => e.event === 'started'));
    await waitFor(
      async () =>
        started().length >= total &&
        (await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE queue = 'paced' AND state = 'completed'`)).rows[0].n === total,
      'every paced job to start and complete',
      60_000,
      50,
    );

    const starts = started();
    const most = mostInAnyWindowOf(
      starts.map((e) => Number(e.at)),
      1000,
    );
    // How long after its claim each handler started (the claim's clock is the database's, on this host).
    const { rows } = await sql.query(`SELECT id, extract(epoch FROM claimed_at) * 1000 AS claimed FROM stampeded_jobs WHERE queue = 'paced'`);
    const claimed = new Map(rows.map((r) => [r.id as string, Number(r.claimed)]));
    const givenBack = workers.reduce((n, w) => n + w.count('released'), 0);
    const lags = starts.map((e) => Number(e.wall) - claimed.get(String(e.id))!).sort((a, b) => a - b);
    process.stderr.write(
      `rate limit 50/s, 4 processes x concurrency 25, ${total} jobs: at most ${most} handlers started in any 1 s window; ` +
        `start after claim p50 ${lags[lags.length >> 1].toFixed(0)} ms, max ${lags[lags.length - 1].toFixed(0)} ms; ${givenBack} given back unstarted\n`,
    );
    expect(most).toBeLessThanOrEqual(50);
    // Every job ran, and each once.
    expect(new Set(starts.map((e) => e.id)).size).toBe(total);
    expect(starts).toHaveLength(total);
  }, 120_000);

  it('limits each tenant and a task in their own windows, and a tenant at its limit does not hold back the tenants behind it', async () => {
    const stampeded = {
      worker: { concurrency: 10 },
      control: { rateLimits: { tenants: { '*': { limit: 10, per: '1s' } }, tasks: { 'tenant-work': { limit: 25, per: '1s' } } } },
    };
    await startFleet(2, { stampeded, queues: [{ name: 'tenants' }] });
    // A's flood first in claim order, then B's and C's few, then D's.
    for (const [tenant, n] of [
      ['a', 60],
      ['b', 5],
      ['c', 5],
      ['d', 20],
    ] as const) {
      await sql.query(`INSERT INTO stampeded_jobs (queue, task, tenant_id) SELECT 'tenants', 'tenant-work', $1 FROM generate_series(1, $2)`, [tenant, n]);
    }
    await waitFor(
      async () => (await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE state = 'completed' AND tenant_id <> 'a'`)).rows[0].n === 30,
      'the tenants behind the flood to drain',
      60_000,
      50,
    );
    for (const tenant of ['a', 'b', 'c', 'd']) {
      expect(await mostInAnyWindow(`tenant_id = $1`, 1000, [tenant])).toBeLessThanOrEqual(10);
    }
    expect(await mostInAnyWindow(`task = 'tenant-work'`, 1000)).toBeLessThanOrEqual(25);
    expect(await mostInAnyWindow(`tenant_id = 'a'`, 1000)).toBeGreaterThanOrEqual(9);
    // B and C, behind A's flood, start in the first window: A's full window is passed over.
    const { rows } = await sql.query(
      `SELECT count(*)::int AS n FROM stampeded_jobs
        WHERE tenant_id IN ('b', 'c') AND claimed_at < (SELECT min(claimed_at) FROM stampeded_jobs) + interval '1 second'`,
    );
    expect(rows[0].n).toBe(10);
    // A's waiting jobs were never claimed: no attempt spent, no deferral.
    const attempts = await sql.query(
      `SELECT max(attempt)::int AS attempts, max(deferrals)::int AS deferrals, count(*) FILTER (WHERE state = 'available')::int AS waiting FROM stampeded_jobs`,
    );
    expect(attempts.rows[0]).toMatchObject({ attempts: 1, deferrals: 0 });
    expect(attempts.rows[0].waiting).toBeGreaterThan(0);
  }, 120_000);

  it('limits each destination in its own window across three processes, and a destination at its limit does not slow another', async () => {
    const stampeded = {
      worker: { concurrency: 10 },
      // '*': every destination its own window of 10 a second; a named one replaces it.
      control: { rateLimits: { destinations: { '*': { limit: 10, per: '1s' }, 'fast.example.com': { limit: 10_000, per: '1s' } } } },
    };
    await startFleet(3, { stampeded, queues: [{ name: 'calls' }] });
    // The limited destinations first in claim order, then the fast one's jobs behind them.
    for (const [destination, n] of [
      ['a.example.com', 40],
      ['b.example.com', 40],
      ['fast.example.com', 300],
    ] as const) {
      await sql.query(`INSERT INTO stampeded_jobs (queue, task, destination) SELECT 'calls', 'call', $1 FROM generate_series(1, $2)`, [destination, n]);
    }
    const completed = async (destination: string) =>
      (await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE destination = $1 AND state = 'completed'`, [destination])).rows[0].n as number;
    await waitFor(async () => (await completed('fast.example.com')) === 300, 'the fast destination to drain', 60_000, 20);
    const limitedDoneWhenFastDrained = (await completed('a.example.com')) + (await completed('b.example.com'));
    await waitFor(async () => (await completed('a.example.com')) + (await completed('b.example.com')) === 80, 'the limited destinations to drain', 60_000, 50);

    const a = await mostInAnyWindow(`destination = 'a.example.com'`, 1000);
    const b = await mostInAnyWindow(`destination = 'b.example.com'`, 1000);
    const both = await mostInAnyWindow(`destination IN ('a.example.com', 'b.example.com')`, 1000);
    // The fast destination's starts before a.example.com's second window could open (its 11th start).
    const { rows: early } = await sql.query(
      `SELECT count(*)::int AS n FROM stampeded_jobs
        WHERE destination = 'fast.example.com'
          AND claimed_at < (SELECT claimed_at FROM stampeded_jobs WHERE destination = 'a.example.com' ORDER BY claimed_at OFFSET 10 LIMIT 1)`,
    );
    process.stderr.write(
      `destination limit 10/s each ('*'), 3 processes x concurrency 10: at most ${a} (a) and ${b} (b) started in any 1 s window, ${both} of both; ` +
        `${early[0].n} of 300 fast jobs started before a's second window, ${limitedDoneWhenFastDrained} of 80 limited done when they drained\n`,
    );
    // Each destination's window holds, counted from claimed_at.
    expect(a).toBeLessThanOrEqual(10);
    expect(b).toBeLessThanOrEqual(10);
    // Used, not merely respected.
    expect(a).toBeGreaterThanOrEqual(9);
    expect(b).toBeGreaterThanOrEqual(9);
    // Each its own window: one window shared by every destination would hold both to 10 together.
    expect(both).toBeGreaterThan(10);
    // The fast destination is not held behind the full ones: most of its jobs start in their first window.
    expect(early[0].n).toBeGreaterThan(30);
    expect(limitedDoneWhenFastDrained).toBeLessThan(80);
    const { rows } = await sql.query(`SELECT max(attempt)::int AS attempts, max(deferrals)::int AS deferrals FROM stampeded_jobs`);
    expect(rows[0]).toMatchObject({ attempts: 1, deferrals: 0 });
  }, 120_000);
});
