// How fast tenant fairness reacts to tenants that arrive behind a flood:
// three worker processes (concurrency 5, fairness on) work one tenant's
// flood of 20 ms jobs; once it runs, ten small tenants enqueue 20 jobs each.
// Prints, from the database's own times, how long the small tenants' jobs
// waited (inserted_at to claimed_at: p50, p95, max) against how long the
// flood took to drain, and the ratio at p95. With equal shares among eleven
// tenants, the small ones' jobs start within about a tenth of the drain.
//
//   node bench/fairness-arrivals.mjs                    2,000 flood jobs, three runs
//   node bench/fairness-arrivals.mjs --flood 5000 --runs 1 --refresh 1000
//
// --refresh sets control.refreshInterval (default: the option's default).
// PostgreSQL: one started for the run (embedded). Run `npm run build` first:
// the workers load the built packages.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startPostgres, createTestDatabase } from '@stampeded/testing';
import { migrate } from '@stampeded/nestjs';
import { args, option } from './args.mjs';

const FLOOD = Number(option('flood', 2000));
const RUNS = Number(option('runs', 3));
const REFRESH = option('refresh');
const SMALL_TENANTS = 10;
const SMALL_JOBS = 20;
const MAIN = fileURLToPath(new URL('../test/fixtures/worker-process/main.mjs', import.meta.url));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function startWorker(url) {
  const config = {
    url,
    tasks: 'control',
    stampeded: {
      migrations: 'auto',
      worker: { concurrency: 5 },
      maintenance: { enabled: false },
      control: { fairness: true, ...(REFRESH ? { refreshInterval: Number(REFRESH) } : {}) },
    },
  };
  const child = fork(MAIN, [], {
    env: { ...process.env, NODE_OPTIONS: '', STAMPEDED_TEST_PROCESS: JSON.stringify(config) },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const ready = new Promise((resolve, reject) => {
    child.on('message', (m) => m.event === 'ready' && resolve());
    child.once('exit', (code) => reject(new Error(`a worker exited with ${code} before it was ready`)));
  });
  return { child, ready };
}

const server = await startPostgres();
const results = [];
try {
  for (let run = 1; run <= RUNS; run++) {
    const db = await createTestDatabase(server.url, `fairness_arrivals_${run}`);
    await migrate(db.url);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    const first = startWorker(db.url);
    await first.ready;
    const workers = [first, startWorker(db.url), startWorker(db.url)];
    await Promise.all(workers.map((w) => w.ready));

    await client.query(
      `INSERT INTO stampeded_jobs (queue, task, args, tenant_id) SELECT 'tenants', 'tenant-work', '{"ms": 20}', 'flood' FROM generate_series(1, $1)`,
      [FLOOD],
    );
    // The flood runs, and its jobs fill the workers' buffers, before the others arrive.
    await sleep(500);
    await client.query(
      `INSERT INTO stampeded_jobs (queue, task, args, tenant_id)
       SELECT 'tenants', 'tenant-work', '{"ms": 20}', 'small-' || t FROM generate_series(1, $1) t, generate_series(1, $2)`,
      [SMALL_TENANTS, SMALL_JOBS],
    );
    const total = FLOOD + SMALL_TENANTS * SMALL_JOBS;
    for (;;) {
      const { rows } = await client.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE state = 'completed'`);
      if (rows[0].n === total) break;
      await sleep(100);
    }
    const { rows } = await client.query(
      `WITH small AS (SELECT extract(epoch FROM claimed_at - inserted_at)::float8 AS wait FROM stampeded_jobs WHERE tenant_id <> 'flood')
       SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY wait) AS p50,
              percentile_cont(0.95) WITHIN GROUP (ORDER BY wait) AS p95,
              max(wait) AS max, min(wait) AS first,
              (SELECT extract(epoch FROM max(finished_at) - min(inserted_at))::float8 FROM stampeded_jobs WHERE tenant_id = 'flood') AS drain,
              (SELECT sum(deferrals)::int FROM stampeded_jobs) AS deferrals
         FROM small`,
    );
    const r = rows[0];
    // What sets the pace: the claims that took small tenants' jobs (one
    // statement each: its jobs share claimed_by and claimed_at), and the
    // flood's jobs claimed and finished while the small tenants had work.
    const { rows: pace } = await client.query(
      `WITH t0 AS (SELECT min(inserted_at) AS at FROM stampeded_jobs WHERE tenant_id <> 'flood'),
            small_end AS (SELECT max(claimed_at) AS claimed, max(finished_at) AS finished FROM stampeded_jobs WHERE tenant_id <> 'flood'),
            claims AS (SELECT claimed_by, claimed_at, count(*) FILTER (WHERE tenant_id <> 'flood') AS small,
                              count(DISTINCT tenant_id) FILTER (WHERE tenant_id <> 'flood') AS tenants
                         FROM stampeded_jobs, t0, small_end WHERE claimed_at >= t0.at AND claimed_at <= small_end.claimed
                        GROUP BY 1, 2)
       SELECT (SELECT count(*) FROM claims)::int AS claims,
              (SELECT avg(small) FROM claims WHERE small > 0)::float8 AS small_per_claim,
              (SELECT avg(small::float8 / tenants) FROM claims WHERE small > 0)::float8 AS per_tenant,
              (SELECT count(*) FROM stampeded_jobs, t0, small_end WHERE tenant_id = 'flood' AND claimed_at >= t0.at AND claimed_at <= small_end.claimed)::int AS flood_claimed,
              (SELECT count(*) FROM stampeded_jobs, t0, small_end WHERE tenant_id = 'flood' AND finished_at >= t0.at AND finished_at <= small_end.finished)::int AS flood_finished,
              (SELECT count(*) FROM stampeded_jobs, t0 WHERE tenant_id = 'flood' AND claimed_at < t0.at AND finished_at >= t0.at)::int AS flood_buffered,
              (SELECT percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - inserted_at)) FROM stampeded_jobs WHERE tenant_id <> 'flood')::float8 AS done_p95`,
    );
    const p = pace[0];
    if (args.includes('--timeline')) {
      // Per 100 ms from the small tenants' arrival: jobs of each kind started.
      const { rows: timeline } = await client.query(
        `WITH t0 AS (SELECT min(inserted_at) AS at FROM stampeded_jobs WHERE tenant_id <> 'flood')
         SELECT floor(extract(epoch FROM claimed_at - t0.at) * 10)::int AS slot,
                count(*) FILTER (WHERE tenant_id <> 'flood')::int AS small, count(*) FILTER (WHERE tenant_id = 'flood')::int AS flood
           FROM stampeded_jobs, t0 WHERE claimed_at >= t0.at AND claimed_at < t0.at + interval '3 seconds'
          GROUP BY 1 ORDER BY 1`,
      );
      console.log(timeline.map((x) => `${x.slot}:${x.small}/${x.flood}`).join(' '));
      const { rows: claims } = await client.query(
        `WITH t0 AS (SELECT min(inserted_at) AS at FROM stampeded_jobs WHERE tenant_id <> 'flood')
         SELECT left(claimed_by::text, 4) AS w, (extract(epoch FROM claimed_at - t0.at) * 1000)::int AS ms,
                count(*) FILTER (WHERE tenant_id <> 'flood')::int AS small, count(*) FILTER (WHERE tenant_id = 'flood')::int AS flood
           FROM stampeded_jobs, t0 WHERE claimed_at >= t0.at - interval '0.2 seconds' AND claimed_at < t0.at + interval '1 seconds'
          GROUP BY 1, 2 ORDER BY 2`,
      );
      console.log(claims.map((x) => `${x.w}@${x.ms}:${x.small}/${x.flood}`).join(' '));
      const { rows: fin } = await client.query(
        `WITH t0 AS (SELECT min(inserted_at) AS at FROM stampeded_jobs WHERE tenant_id <> 'flood')
         SELECT (extract(epoch FROM claimed_at - t0.at) * 1000)::int AS c, (extract(epoch FROM finished_at - t0.at) * 1000)::int AS f
           FROM stampeded_jobs, t0 WHERE tenant_id <> 'flood' ORDER BY claimed_at LIMIT 30`,
      );
      console.log(fin.map((x) => `${x.c}->${x.f}`).join(' '));
    }
    results.push(r);
    console.log(
      `run ${run}: flood of ${FLOOD} drained in ${r.drain.toFixed(2)} s; small tenants' first job started after ${r.first.toFixed(2)} s, waited p50 ${r.p50.toFixed(2)} s, ` +
        `p95 ${r.p95.toFixed(2)} s (${((100 * r.p95) / r.drain).toFixed(0)}% of the drain), max ${r.max.toFixed(2)} s; ${r.deferrals} deferrals`,
    );
    console.log(
      `  finished p95 ${p.done_p95.toFixed(2)} s (${((100 * p.done_p95) / r.drain).toFixed(0)}%); while the small tenants were claimed: ${p.claims} claims, ` +
        `${p.small_per_claim.toFixed(1)} small jobs a claim (${p.per_tenant.toFixed(2)} a tenant), ${p.flood_claimed} flood jobs claimed; ` +
        `${p.flood_buffered} flood jobs claimed before the arrival finished after it; ${p.flood_finished} flood jobs finished while the small ones ran`,
    );
    await Promise.all(
      workers.map(({ child }) => {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        return exited;
      }),
    );
    await client.end();
    await db.drop();
  }
} finally {
  await server.stop();
}
