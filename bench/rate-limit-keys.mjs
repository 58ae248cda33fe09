// What a rate-limited claim costs when stampeded_rate_limits holds many keys
// (a window per tenant, '*', keeps a row for every tenant ever limited):
// --keys rows of 'tenant:<n>', half of them full, and --jobs due jobs of
// tenants with room, then claims of 10 with stampeded_claim_limited, each in a
// transaction rolled back (every claim sees the same table). Prints, per
// claim, the median time and the buffers touched (EXPLAIN (ANALYZE, BUFFERS)
// of the call; the statements inside it count), and the statements inside
// the function that touched the most buffers (pg_stat_statements).
//
// Two orders of the queue: 'room' (the head's tenants have room) and
// 'full ahead' (a full tenant's 200 jobs at the head of the claim order).
//
//   node bench/rate-limit-keys.mjs                       10,000 keys, 20 claims each way
//   node bench/rate-limit-keys.mjs --keys 1000 --function old.sql
//
// --function FILE replaces stampeded_claim_limited with FILE's text first (to
// measure another version of it). PostgreSQL: one started for the run
// (embedded). Run `npm run build` first.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { startPostgres, createTestDatabase } from '@stampeded/testing';
import { migrate } from '@stampeded/nestjs';
import { withBlocks } from '@stampeded/nestjs/internal';
import { option } from './args.mjs';

const KEYS = Number(option('keys', 10_000));
const JOBS = Number(option('jobs', 2000));
const CLAIMS = Number(option('claims', 20));
const RULES = JSON.stringify({ tenant: { '*': { limit: 1_000_000, ms: 60_000 } } });

const server = await startPostgres({ settings: { shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track': 'all' } });
const db = await createTestDatabase(server.url, 'rate_limit_keys');
const client = new pg.Client({ connectionString: db.url });
await client.connect();
const q = (text, params) => client.query(text, params);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

try {
  await migrate(db.url);
  await q(`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`);
  await q(`SELECT stampeded_create_queue('limited')`);
  // As the runner installs it: with the blocks it names written in.
  if (option('function')) await q(withBlocks(readFileSync(option('function'), 'utf8'), option('function')));
  // Odd tenants full for the next hour, even ones with room; each key with a log of one claim.
  await q(
    `INSERT INTO stampeded_rate_limits (key, started_at, started, full_until)
     SELECT 'tenant:' || g, ARRAY[now()], ARRAY[1], CASE WHEN g % 2 = 1 THEN now() + interval '1 hour' END
       FROM generate_series(1, $1) g`,
    [KEYS],
  );
  const scenarios = [
    ['room', `SELECT 'limited', 'w', 'tenant:' || (2 * (1 + g % ($2 / 2))), now() FROM generate_series(1, $1) g`],
    [
      'full ahead',
      `SELECT 'limited', 'w', 'tenant:1', now() - interval '1 minute' FROM generate_series(1, 200)
       UNION ALL SELECT 'limited', 'w', 'tenant:' || (2 * (1 + g % ($2 / 2))), now() FROM generate_series(1, $1) g`,
    ],
  ];
  for (const [name, jobs] of scenarios) {
    await q(`DELETE FROM stampeded_jobs`);
    await q(`INSERT INTO stampeded_jobs (queue, task, tenant_id, scheduled_at) SELECT q, t, substr(k, 8), s FROM (${jobs}) AS j(q, t, k, s)`, [JOBS, KEYS]);
    await q(`ANALYZE stampeded_jobs; ANALYZE stampeded_rate_limits`);
    await q(`SELECT pg_stat_statements_reset()`);
    const times = [];
    const buffers = [];
    let claimed = 0;
    for (let i = 0; i < CLAIMS; i++) {
      await q('BEGIN');
      const { rows } = await q(
        `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM stampeded_claim_limited('limited', $1, 10, NULL, $2::jsonb, NULL, NULL)`,
        [randomUUID(), RULES],
      );
      await q('ROLLBACK');
      const plan = rows[0]['QUERY PLAN'][0];
      times.push(plan['Execution Time']);
      buffers.push(plan.Plan['Shared Hit Blocks'] + plan.Plan['Shared Read Blocks']);
      claimed = plan.Plan['Actual Rows'];
    }
    const { rows: inner } = await q(
      `SELECT round((shared_blks_hit + shared_blks_read)::numeric / calls, 1) AS buffers, round((total_exec_time / calls)::numeric, 3) AS ms,
              regexp_replace(left(query, 110), '\\s+', ' ', 'g') AS query
         FROM pg_stat_statements
        WHERE query NOT ILIKE '%EXPLAIN%' AND query NOT ILIKE '%pg_stat_statements%' AND calls >= $1
        ORDER BY shared_blks_hit + shared_blks_read DESC LIMIT 4`,
      [CLAIMS],
    );
    console.log(
      `${KEYS} keys, ${name}: a claim of 10 took ${median(times).toFixed(2)} ms (median of ${CLAIMS}), ${median(buffers)} buffers, returned ${claimed} rows`,
    );
    for (const s of inner) console.log(`  ${String(s.buffers).padStart(7)} buffers ${String(s.ms).padStart(8)} ms  ${s.query}`);
  }
} finally {
  await client.end();
  await db.drop();
  await server.stop();
}
