// What a narrower job row would write: the WAL of a claim and a completion on
// a scratch table that has the claim's and the completion's columns only (10
// columns, about 104 bytes a row), with the same partial indexes and the same
// batched statements as Stampeded's (FOR UPDATE SKIP LOCKED claim through the
// primary key, fenced completion), against the same table padded to
// stampeded_jobs' width (about 258 bytes). No Stampeded code runs: this
// measures a design, the "narrower hot row" of the performance issue, before
// anyone builds it. WAL is exact from run to run (pg_current_wal_insert_lsn
// before and after); nothing else here is timed.
//
//   node bench/narrow-row.mjs                    50,000 jobs, batches of 500
//   node bench/narrow-row.mjs --jobs 20000 --fillfactor 70
import pg from 'pg';
import { startPostgres, createTestDatabase } from '@stampeded/testing';
import { option } from './args.mjs';

const JOBS = Number(option('jobs', 50_000));
const BATCH = Number(option('batch', 500));
const FILLFACTORS = option('fillfactor', '85,50').split(',').map(Number);
const WORKER = '00000000-0000-0000-0000-000000000001';

const server = await startPostgres();
const db = await createTestDatabase(server.url, 'narrow_row');
const client = new pg.Client({ connectionString: db.url });
await client.connect();
const q = (text, params) => client.query(text, params);

/** The claim's and the completion's columns; `padding` bytes of payload beside them stand for the rest of a job's row. */
const table = (fillfactor, padding) => `
  CREATE TABLE hot (
    id uuid PRIMARY KEY, state text NOT NULL DEFAULT 'available', priority smallint NOT NULL DEFAULT 0,
    scheduled_at timestamptz NOT NULL DEFAULT now(), attempt smallint NOT NULL DEFAULT 0,
    max_attempts smallint NOT NULL DEFAULT 3, claimed_by uuid, claimed_at timestamptz,
    heartbeat_at timestamptz, finished_at timestamptz
    ${padding ? `, payload text NOT NULL DEFAULT repeat('x', ${padding})` : ''}
  ) WITH (fillfactor = ${fillfactor})`;

async function walOf(run) {
  const before = (await q(`SELECT pg_current_wal_insert_lsn() AS lsn`)).rows[0].lsn;
  await run();
  const after = (await q(`SELECT pg_current_wal_insert_lsn() AS lsn`)).rows[0].lsn;
  return Number((await q(`SELECT pg_wal_lsn_diff($1, $2)::bigint AS bytes`, [after, before])).rows[0].bytes);
}

async function measure(label, fillfactor, padding) {
  await q(`DROP TABLE IF EXISTS hot`);
  await q(table(fillfactor, padding));
  // Stampeded's claim, in-flight and finished indexes, with the same predicates.
  await q(`CREATE INDEX hot_claim ON hot (priority, scheduled_at) WHERE state IN ('available', 'retryable')`);
  await q(`CREATE INDEX hot_claimed ON hot (claimed_at) WHERE state IN ('claimed', 'executing')`);
  await q(`CREATE INDEX hot_finished ON hot (finished_at) WHERE state IN ('completed', 'discarded', 'cancelled')`);
  await q(`INSERT INTO hot (id) SELECT gen_random_uuid() FROM generate_series(1, $1)`, [JOBS]);
  await q(`VACUUM ANALYZE hot`);
  await q(`CHECKPOINT`);
  const bytes = await walOf(async () => {
    for (;;) {
      const { rows } = await q(
        `WITH candidate AS MATERIALIZED (
           SELECT id FROM hot WHERE state IN ('available', 'retryable') AND scheduled_at <= now()
            ORDER BY priority, scheduled_at LIMIT $1 FOR UPDATE SKIP LOCKED)
         UPDATE hot h SET state = 'executing', attempt = h.attempt + 1, claimed_by = $2, claimed_at = now(), heartbeat_at = now()
          WHERE h.id = ANY (ARRAY(SELECT id FROM candidate))
         RETURNING h.id, h.attempt`,
        [BATCH, WORKER],
      );
      if (!rows.length) break;
      await q(
        `UPDATE hot h SET state = 'completed', finished_at = now(), claimed_by = NULL
           FROM unnest($1::uuid[], $2::smallint[]) AS o(id, attempt)
          WHERE h.id = ANY ($1::uuid[]) AND h.id = o.id AND h.claimed_by = $3 AND h.attempt = o.attempt`,
        [rows.map((r) => r.id), rows.map((r) => r.attempt), WORKER],
      );
    }
  });
  const { width } = (await q(`SELECT avg(pg_column_size(h.*))::int AS width FROM hot h`)).rows[0];
  console.log(`| ${label} | ${fillfactor} | ${width} | ${(bytes / JOBS).toFixed(0)} |`);
}

try {
  console.log(`${JOBS} jobs, batches of ${BATCH}: WAL a job for its claim and completion\n`);
  console.log('| row | fillfactor | row bytes | WAL a job (bytes) |\n|---|---|---|---|');
  for (const fillfactor of FILLFACTORS) {
    await measure('the claim and completion columns only', fillfactor, 0);
    await measure("the same, padded to stampeded_jobs' width", fillfactor, 150);
  }
} finally {
  await client.end();
  await db.drop();
  await server.stop();
}
