// What a narrower job row would write, over a job's whole life: the WAL of
// its enqueue, its claim and its completion on scratch tables, with the same
// partial indexes and the same batched statements as Stampeded's (a bulk
// insert, the FOR UPDATE SKIP LOCKED claim through the primary key, the
// fenced completion). No Stampeded code runs: this measures a design, the
// "narrower hot row" of the performance issue, before anyone builds it. Three
// shapes:
//
//   wide    one row with the claim's and completion's ten columns and
//           `--padding` bytes beside them (150: stampeded_jobs' width, about
//           258 bytes a row);
//   split   the same ten columns in a narrow row, and the rest (the padding)
//           in a second table keyed by the job's id, written once at the
//           enqueue and only read by the claim;
//   narrow  the ten columns alone: what the split would cost if the rest
//           were free, a floor no real design reaches.
//
// WAL is exact from run to run (pg_current_wal_insert_lsn before and after
// each phase, one connection, nothing else running); the time of each phase
// is the statements' wall time on that connection, a rough guide only.
//
//   node bench/narrow-row.mjs                    50,000 jobs, batches of 500
//   node bench/narrow-row.mjs --jobs 20000 --fillfactor 70 --padding 150
//   node bench/narrow-row.mjs --hot real --padding 75
//
// --hot real gives the hot row every column a split of stampeded_jobs would
// have to keep in it, not only the ten the claim and the completion set: the
// queue (the partition key, first in the primary key), attempted_by (the
// claim appends the worker's id to it, 48 bytes for the first) and
// expire_seconds (the expirer reads it beside claimed_at). What is left
// beside them for a no-op job of the benchmark is about 75 bytes: the task,
// args, meta, the retry and backoff settings, errors and inserted_at.
import pg from 'pg';
import { startPostgres, createTestDatabase } from '@stampeded/testing';
import { option } from './args.mjs';

const JOBS = Number(option('jobs', 50_000));
const BATCH = Number(option('batch', 500));
const PADDING = Number(option('padding', 150));
const FILLFACTORS = option('fillfactor', '85,50').split(',').map(Number);
const REAL_HOT = option('hot', 'min') === 'real';
const WORKER = '00000000-0000-0000-0000-000000000001';

const server = await startPostgres();
const db = await createTestDatabase(server.url, 'narrow_row');
const client = new pg.Client({ connectionString: db.url });
await client.connect();
const q = (text, params) => client.query(text, params);

/** The claim's and the completion's columns; `padding` bytes of payload beside them stand for the rest of a job's row. */
const hotTable = (fillfactor, padding) => `
  CREATE TABLE hot (
    id uuid PRIMARY KEY, state text NOT NULL DEFAULT 'available', priority smallint NOT NULL DEFAULT 0,
    scheduled_at timestamptz NOT NULL DEFAULT now(), attempt smallint NOT NULL DEFAULT 0,
    max_attempts smallint NOT NULL DEFAULT 3, claimed_by uuid, claimed_at timestamptz,
    heartbeat_at timestamptz, finished_at timestamptz
    ${REAL_HOT ? `, queue text NOT NULL DEFAULT 'bench', attempted_by text[] NOT NULL DEFAULT '{}', expire_seconds integer NOT NULL DEFAULT 3600` : ''}
    ${padding ? `, payload text NOT NULL` : ''}
  ) WITH (fillfactor = ${fillfactor})`;

/** What moves to the second table in the split: written at the enqueue, read by the claim, never updated on the hot path. */
const coldTable = `CREATE TABLE cold (id uuid PRIMARY KEY, payload text NOT NULL)`;

async function walOf(run) {
  const lsn = async () => (await q(`SELECT pg_current_wal_insert_lsn() AS lsn`)).rows[0].lsn;
  const before = await lsn();
  const started = performance.now();
  await run();
  const ms = performance.now() - started;
  const after = await lsn();
  const bytes = Number((await q(`SELECT pg_wal_lsn_diff($1, $2)::bigint AS bytes`, [after, before])).rows[0].bytes);
  return { bytes, ms };
}

async function measure(shape, fillfactor) {
  await q(`DROP TABLE IF EXISTS hot; DROP TABLE IF EXISTS cold`);
  await q(hotTable(fillfactor, shape === 'wide' ? PADDING : 0));
  if (shape === 'split') await q(coldTable);
  // Stampeded's claim, in-flight and finished indexes, with the same predicates.
  await q(`CREATE INDEX hot_claim ON hot (priority, scheduled_at) WHERE state IN ('available', 'retryable')`);
  await q(`CREATE INDEX hot_claimed ON hot (claimed_at) WHERE state IN ('claimed', 'executing')`);
  await q(`CREATE INDEX hot_finished ON hot (finished_at) WHERE state IN ('completed', 'discarded', 'cancelled')`);
  await q(`CHECKPOINT`);

  // The enqueue: bulk inserts of BATCH jobs, one transaction each, as enqueueMany() sends them.
  const enqueue = await walOf(async () => {
    for (let i = 0; i < JOBS; i += BATCH) {
      const n = Math.min(BATCH, JOBS - i);
      if (shape === 'wide') {
        await q(`INSERT INTO hot (id, payload) SELECT uuidv7(), repeat('x', $2) FROM generate_series(1, $1)`, [n, PADDING]);
      } else if (shape === 'split') {
        await q(
          `WITH ids AS (SELECT uuidv7() AS id FROM generate_series(1, $1)),
                h AS (INSERT INTO hot (id) SELECT id FROM ids)
           INSERT INTO cold (id, payload) SELECT id, repeat('x', $2) FROM ids`,
          [n, PADDING],
        );
      } else {
        await q(`INSERT INTO hot (id) SELECT uuidv7() FROM generate_series(1, $1)`, [n]);
      }
    }
  });
  await q(`VACUUM ANALYZE`);
  await q(`CHECKPOINT`);

  // The claim (returning what a worker needs to run the job: the payload, from the second table in the split) and the completion.
  const claimed = { bytes: 0, ms: 0 };
  const completed = { bytes: 0, ms: 0 };
  const payload = shape === 'wide' ? ', h.payload' : shape === 'split' ? ', (SELECT c.payload FROM cold c WHERE c.id = h.id) AS payload' : '';
  for (;;) {
    let rows = [];
    const claim = await walOf(async () => {
      ({ rows } = await q(
        `WITH candidate AS MATERIALIZED (
           SELECT id FROM hot WHERE state IN ('available', 'retryable') AND scheduled_at <= now()
            ORDER BY priority, scheduled_at LIMIT $1 FOR UPDATE SKIP LOCKED)
         UPDATE hot h SET state = 'executing', attempt = h.attempt + 1, claimed_by = $2, claimed_at = now(), heartbeat_at = now()${REAL_HOT ? ', attempted_by = array_append(h.attempted_by, $2::uuid::text)' : ''}
          WHERE h.id = ANY (ARRAY(SELECT id FROM candidate))
         RETURNING h.id, h.attempt${payload}`,
        [BATCH, WORKER],
      ));
    });
    claimed.bytes += claim.bytes;
    claimed.ms += claim.ms;
    if (!rows.length) break;
    const complete = await walOf(() =>
      q(
        `UPDATE hot h SET state = 'completed', finished_at = now(), claimed_by = NULL
           FROM unnest($1::uuid[], $2::smallint[]) AS o(id, attempt)
          WHERE h.id = ANY ($1::uuid[]) AND h.id = o.id AND h.claimed_by = $3 AND h.attempt = o.attempt`,
        [rows.map((r) => r.id), rows.map((r) => r.attempt), WORKER],
      ),
    );
    completed.bytes += complete.bytes;
    completed.ms += complete.ms;
  }
  const { width } = (await q(`SELECT avg(pg_column_size(h.*))::int AS width FROM hot h`)).rows[0];
  const perJob = (x) => (x / JOBS).toFixed(0);
  const us = (x) => ((x * 1000) / JOBS).toFixed(1);
  const total = enqueue.bytes + claimed.bytes + completed.bytes;
  console.log(
    `| ${shape} | ${fillfactor} | ${width} | ${perJob(enqueue.bytes)} | ${perJob(claimed.bytes)} | ${perJob(completed.bytes)} | **${perJob(total)}** | ` +
      `${us(enqueue.ms)} / ${us(claimed.ms)} / ${us(completed.ms)} |`,
  );
}

try {
  console.log(
    `${JOBS} jobs, batches of ${BATCH}, ${REAL_HOT ? 'the hot columns of a real split' : 'ten hot columns'} and ${PADDING} bytes beside them: WAL a job, by phase\n`,
  );
  console.log('| shape | fillfactor | hot row bytes | enqueue | claim | completion | whole life | us a job (enqueue / claim / completion) |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const fillfactor of FILLFACTORS) {
    for (const shape of ['wide', 'split', 'narrow']) await measure(shape, fillfactor);
  }
} finally {
  await client.end();
  await db.drop();
  await server.stop();
}
