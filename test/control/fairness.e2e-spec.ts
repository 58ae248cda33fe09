import type pg from 'pg';
import { migrate } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { sqlClient, testDatabase, waitFor } from '../support/test-app.js';
import { WorkerProcess } from '../support/worker-process.js';

const LONG = process.env.STAMPEDED_CONTROL_LONG === '1';

describe('queue control: a fair share of the running slots per tenant', () => {
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
    await sql.query(`DELETE FROM stampeded_jobs; DELETE FROM stampeded_workers`);
  });

  afterAll(async () => {
    await sql?.end();
    await db?.drop();
  });

  function start(stampeded: Record<string, unknown>): WorkerProcess {
    const p = WorkerProcess.start({ url: db.url, tasks: 'control', stampeded: { migrations: 'auto', ...stampeded } });
    fleet.push(p);
    return p;
  }

  it(
    'one tenant floods the queue, ten tenants enqueue 50 each: the small tenants finish long before the flood drains',
    async () => {
      const flood = LONG ? 10_000 : 2000;
      const stampeded = {
        worker: { concurrency: 5, pollIntervalMs: 100 },
        maintenance: { enabled: false },
        control: { fairness: true, refreshInterval: 200 },
      };
      const workers = [start(stampeded), start(stampeded), start(stampeded)];
      await Promise.all(workers.map((w) => w.ready()));

      await sql.query(
        `INSERT INTO stampeded_jobs (queue, task, args, tenant_id) SELECT 'tenants', 'tenant-work', '{"ms": 20}', 'flood' FROM generate_series(1, $1)`,
        [flood],
      );
      await sql.query(
        `INSERT INTO stampeded_jobs (queue, task, args, tenant_id)
       SELECT 'tenants', 'tenant-work', '{"ms": 20}', 'small-' || lpad(t::text, 2, '0') FROM generate_series(1, 10) t, generate_series(1, 50)`,
      );
      const total = flood + 500;
      await waitFor(
        async () => {
          const { rows: states } = await sql.query(
            `SELECT state, count(*)::int AS n, sum(deferrals)::int AS d FROM stampeded_jobs GROUP BY state ORDER BY state`,
          );
          return states.find((r) => r.state === 'completed')?.n === total;
        },
        'every job to complete',
        LONG ? 600_000 : 90_000,
        500,
      );

      const { rows } = await sql.query(
        `SELECT tenant_id,
              count(*)::int AS jobs,
              percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - inserted_at))::float8 AS p50,
              max(extract(epoch FROM finished_at - inserted_at))::float8 AS max,
              sum(deferrals)::int AS throttled,
              max(attempt)::int AS max_attempt
         FROM stampeded_jobs GROUP BY tenant_id ORDER BY tenant_id`,
      );
      const lines = rows.map(
        (r) =>
          `  ${r.tenant_id.padEnd(9)} ${String(r.jobs).padStart(6)} jobs  wait p50 ${r.p50.toFixed(2)} s  max ${r.max.toFixed(2)} s  throttled ${r.throttled}`,
      );
      const [{ flood_done_then }] = (
        await sql.query(
          `SELECT count(*)::int AS flood_done_then FROM stampeded_jobs
          WHERE tenant_id = 'flood' AND finished_at <= (SELECT max(finished_at) FROM stampeded_jobs WHERE tenant_id <> 'flood')`,
        )
      ).rows;
      process.stderr.write(
        `fairness: 3 processes x concurrency 5, ${flood} flood jobs then 10 tenants x 50, 20 ms each. ` +
          `When the last small tenant's job finished, ${flood_done_then} of ${flood} flood jobs had:\n${lines.join('\n')}\n`,
      );

      const small = rows.filter((r) => r.tenant_id !== 'flood');
      const floodRow = rows.find((r) => r.tenant_id === 'flood')!;
      expect(small).toHaveLength(10);
      // Counts, not times: the small tenants were done while most of the flood still waited.
      expect(flood_done_then).toBeLessThan(flood / 2);
      for (const r of small) expect(r.max).toBeLessThan(floodRow.max);
      // Throttling refunds the attempt: no job spent more than the one it ran on.
      expect(Math.max(...rows.map((r) => r.max_attempt))).toBe(1);
      expect((await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE state <> 'completed'`)).rows[0].n).toBe(0);
    },
    LONG ? 900_000 : 90_000,
  );

  it('tenants that arrive behind a running flood get their shares from the arrival, not from the next refresh', async () => {
    const flood = 2000;
    const stampeded = {
      worker: { concurrency: 5 },
      maintenance: { enabled: false },
      // A refresh far later than the whole run: only the arrival can tell the workers of the new tenants.
      control: { fairness: true, refreshInterval: '60s', freshness: '120s' },
    };
    const first = start(stampeded);
    await first.ready();
    const workers = [first, start(stampeded), start(stampeded)];
    await Promise.all(workers.map((w) => w.ready()));

    await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, args, tenant_id) SELECT 'tenants', 'tenant-work', '{"ms": 20}', 'flood' FROM generate_series(1, $1)`,
      [flood],
    );
    // The flood runs, alone, and fills the workers' buffers.
    await waitFor(
      async () => (await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE state = 'completed'`)).rows[0].n >= 100,
      'the flood to run',
      30_000,
      20,
    );
    await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, args, tenant_id)
       SELECT 'tenants', 'tenant-work', '{"ms": 20}', 'small-' || t FROM generate_series(1, 10) t, generate_series(1, 20)`,
    );
    await waitFor(
      async () => (await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE state = 'completed' AND tenant_id <> 'flood'`)).rows[0].n === 200,
      'the small tenants to finish',
      60_000,
      20,
    );
    const { rows } = await sql.query(
      `SELECT count(*)::int AS n FROM stampeded_jobs
        WHERE tenant_id = 'flood' AND state IN ('available', 'retryable', 'claimed', 'executing')`,
    );
    // Counts, not times: at the plain claim's order the flood would have drained first.
    expect(rows[0].n).toBeGreaterThan(flood / 2);
    // From the claims themselves: every small tenant's job was claimed while
    // most of the flood had not been, whenever this test looked.
    const { rows: claimedFirst } = await sql.query(
      `SELECT count(*)::int AS n FROM stampeded_jobs
        WHERE tenant_id = 'flood' AND claimed_at <= (SELECT max(claimed_at) FROM stampeded_jobs WHERE tenant_id <> 'flood')`,
    );
    expect(claimedFirst[0].n).toBeLessThan(flood / 2);
    expect((await sql.query(`SELECT max(attempt)::int AS n FROM stampeded_jobs WHERE state = 'completed'`)).rows[0].n).toBe(1);
  }, 90_000);
});
