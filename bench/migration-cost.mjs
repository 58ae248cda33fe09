// What migration 8 (a backoff base past the smallint) costs on a jobs table
// that is not empty, against the migration it is not: ALTER COLUMN
// backoff_base_ms TYPE integer. Both hold an ACCESS EXCLUSIVE lock on
// stampeded_jobs until they commit, so the time is how long every enqueue,
// claim and completion waits. Each is run in a transaction that is rolled
// back, on the same table, twice in turn.
//
//   node bench/migration-cost.mjs                  1,000,000 jobs
//   node bench/migration-cost.mjs --jobs 200000
//
// The table: four queue partitions, 80% completed, 10% discarded with an
// error, 10% available, as a busy install holds them between prunes.
// PostgreSQL: a fresh embedded server, durable settings.
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { startPostgres, createTestDatabase } from '@stampeded/testing';
import { migrate } from '@stampeded/nestjs';
import { option } from './args.mjs';

const JOBS = Number(option('jobs', 1_000_000));
const MIGRATION = readFileSync(new URL('../libs/stampeded/src/sql/migrations/0008_backoff_base.sql', import.meta.url), 'utf8');

const server = await startPostgres({ ignoreDatabaseUrl: true });
const db = await createTestDatabase(server.url, 'migration_cost');
const client = new pg.Client({ connectionString: db.url });
await client.connect();
const q = (text, params) => client.query(text, params);

/** Milliseconds that `text` takes inside a transaction that is then rolled back. */
async function timed(text) {
  await q('BEGIN');
  const started = process.hrtime.bigint();
  await q(text);
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  await q('ROLLBACK');
  await q('CHECKPOINT');
  return ms;
}

try {
  // The install as migration 7 left it: the functions apply only at the latest migration, so
  // the latest is installed and migration 8's column taken out again.
  await migrate(db.url);
  await q(`ALTER TABLE stampeded_jobs DROP COLUMN backoff_base_wide_ms`);
  for (const queue of ['emails', 'reports', 'webhooks']) await q(`SELECT stampeded_create_queue($1)`, [queue]);
  for (let i = 0; i < JOBS; i += 50_000) {
    await q(
      `INSERT INTO stampeded_jobs (queue, task, args, state, attempt, finished_at, errors, last_error, failure_kind)
       SELECT (ARRAY['emails', 'reports', 'webhooks', 'default'])[1 + g % 4], 'send-email',
              jsonb_build_object('to', 'user' || g || '@example.com', 'template', 'welcome', 'n', g),
              CASE WHEN g % 10 < 8 THEN 'completed' WHEN g % 10 = 8 THEN 'discarded' ELSE 'available' END,
              CASE WHEN g % 10 < 9 THEN 1 ELSE 0 END,
              CASE WHEN g % 10 < 9 THEN now() - interval '1 hour' END,
              CASE WHEN g % 10 = 8 THEN '[{"at":"2025-01-01T00:00:00Z","attempt":1,"kind":"raised","message":"boom"}]'::jsonb
                   ELSE '[]'::jsonb END,
              CASE WHEN g % 10 = 8 THEN 'boom' END,
              CASE WHEN g % 10 = 8 THEN 'raised' END
         FROM generate_series($1::int, $2::int) g`,
      [i + 1, Math.min(JOBS, i + 50_000)],
    );
  }
  await q('VACUUM ANALYZE');
  await q('CHECKPOINT');
  const [{ size }] = (
    await q(`SELECT pg_size_pretty(sum(pg_total_relation_size(inhrelid))) AS size FROM pg_inherits WHERE inhparent = 'stampeded_jobs'::regclass`)
  ).rows;
  console.log(`${JOBS} jobs, ${size} with their indexes`);
  const runs = { 'migration 8 (a column and its CHECK)': [], 'ALTER COLUMN backoff_base_ms TYPE integer': [] };
  for (let round = 0; round < 2; round++) {
    runs['migration 8 (a column and its CHECK)'].push(await timed(MIGRATION));
    runs['ALTER COLUMN backoff_base_ms TYPE integer'].push(await timed(`ALTER TABLE stampeded_jobs ALTER COLUMN backoff_base_ms TYPE integer`));
  }
  for (const [what, ms] of Object.entries(runs)) console.log(`  ${what}: ${ms.map((m) => `${Math.round(m)} ms`).join(', ')}`);
} finally {
  await client.end();
  await db.drop();
  await server.stop();
}
