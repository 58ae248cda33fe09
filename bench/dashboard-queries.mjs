// Times every query the dashboard and the CLI run, on a table of 1,000,000
// jobs, and prints each one's plan head and whether it read stampeded_jobs
// through an index: the numbers to read are the execution times, which
// should stay under 100 ms however large the table.
//
//   ms        EXPLAIN ANALYZE's execution time, best of 3, as this script
//             has always measured it: it times every plan node, which adds
//             two clock reads per row per node, and so overstates the plans
//             that count many rows (the throughput chart's, about twice)
//   no-timing the same with TIMING OFF: the server's own time for the query
//   wall      the query itself, run as the dashboard runs it, from send to
//             last row, best of 3: what a page waits for. "under 100 ms"
//             reads this one
//   index     "yes" when every scan of stampeded_jobs is an index scan
//
// Not a test: `npm run build && node bench/dashboard-queries.mjs [jobs]`.
// Uses DATABASE_URL when set, otherwise starts an embedded PostgreSQL 18.
import pg from 'pg';
import { startPostgres, createTestDatabase } from '@stampeded/testing';
import { migrate } from '@stampeded/nestjs';
import { GET_JOB, ERRORS_BY_FINGERPRINT, THROUGHPUT } from '../libs/dashboard/dist/sql/jobs.sql.js';
import { listJobsQuery } from '../libs/dashboard/dist/sql/job-list.sql.js';
import { DEAD_LETTER_COPY, DEDUP_TWINS, NEIGHBOUR_SCAN, ORDERING_NEIGHBOURS } from '../libs/dashboard/dist/sql/related.sql.js';
import { uuidv7Bound } from '../libs/dashboard/dist/inspector/related-jobs.js';
import { QUEUE_COUNTS, QUEUE_STATE } from '../libs/dashboard/dist/sql/queues.sql.js';
import { RUNNING_JOBS, WORKERS } from '../libs/dashboard/dist/sql/workers.sql.js';
import { REDRIVE_BATCH, REDRIVE_PREVIEW } from '../libs/stampeded/dist/sql/dead-letters.sql.js';
import { ROLLUP_INSIGHTS } from '../libs/stampeded/dist/sql/maintenance.sql.js';
import { INSIGHTS_HISTOGRAM } from '../libs/stampeded/dist/maintenance/insights-histogram.js';
import { INSIGHTS_TOP_KEYS } from '../libs/stampeded/dist/maintenance/insights-rollup.js';
import { INSIGHTS_KEYS, INSIGHTS_NAMES, INSIGHTS_POINTS, INSIGHTS_WATERMARK } from '../libs/dashboard/dist/sql/insights.sql.js';

const total = Number(process.argv[2] ?? 1_000_000);
const server = await startPostgres({ durable: false });
const db = await createTestDatabase(server.url, 'dashboard_bench');
const client = new pg.Client({ connectionString: db.url });
try {
  await migrate(db.url);
  await client.connect();
  await client.query(`SELECT stampeded_create_queue('emails'), stampeded_create_queue('payments')`);
  const started = Date.now();
  const batch = 100_000;
  for (let from = 1; from <= total; from += batch) {
    // Mostly finished jobs, as a busy install holds: the pages that matter
    // must find the few live ones among them.
    await client.query(
      `INSERT INTO stampeded_jobs (queue, task, state, tenant_id, destination, finished_at, error_fingerprint, last_error, source_id, source_queue, scheduled_at, args,
                                   claimed_at)
       SELECT (ARRAY['emails', 'payments', 'reports', 'emails-dead'])[1 + g % 4], 'task-' || (g % 20),
              CASE WHEN g % 100 = 0 THEN 'available' WHEN g % 100 = 1 THEN 'retryable' WHEN g % 100 = 2 THEN 'discarded' ELSE 'completed' END,
              'tenant-' || (g % 1000), CASE WHEN g % 10 = 0 THEN 'api-' || (g % 5) END,
              CASE WHEN g % 100 >= 2 THEN now() - make_interval(secs => (g % 7200)) END,
              CASE WHEN g % 100 IN (1, 2) THEN stampeded_fingerprint('timeout after ' || (g % 50) || ' ms') END,
              CASE WHEN g % 100 IN (1, 2) THEN 'timeout after ' || (g % 50) || ' ms' END,
              CASE WHEN g % 4 = 3 THEN uuidv7() END, CASE WHEN g % 4 = 3 THEN 'emails' END,
              now() - make_interval(secs => (g % 600)),
              jsonb_build_object('orderId', g, 'region', (ARRAY['eu', 'us'])[1 + g % 2]),
              -- A finished job's claim, for the insights rollup's waits and runs.
              CASE WHEN g % 100 >= 2 THEN now() - make_interval(secs => (g % 7200)) - make_interval(secs => (g % 500) / 1000.0) END
         FROM generate_series($1::int, $2::int) g`,
      [from, Math.min(total, from + batch - 1)],
    );
    process.stderr.write(`\rinserted ${Math.min(total, from + batch - 1)} of ${total} jobs`);
  }
  process.stderr.write(` in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  // A dead-letter queue with work in it: 2,000 emails that failed for good
  // (one error, its numbers normalised out of the fingerprint) and their
  // copies waiting in emails-dead, among its 248,000 copies long handled.
  await client.query(`
    WITH src AS MATERIALIZED (
        SELECT id, row_number() OVER () AS n FROM stampeded_jobs WHERE queue = 'emails' AND state = 'completed' LIMIT 2000
    ), failed AS (
        UPDATE stampeded_jobs j
           SET state = 'discarded', failure_kind = 'raised',
               error_fingerprint = stampeded_fingerprint('connection reset by 10.0.0.' || (src.n % 250)),
               last_error = 'connection reset by 10.0.0.' || (src.n % 250)
          FROM src WHERE j.queue = 'emails' AND j.id = src.id
        RETURNING j.id
    ), copies AS MATERIALIZED (
        SELECT id, row_number() OVER () AS n FROM stampeded_jobs WHERE queue = 'emails-dead' AND state = 'completed' LIMIT 2000
    )
    UPDATE stampeded_jobs c SET state = 'available', finished_at = NULL, source_id = src.id
      FROM copies, src
     WHERE c.queue = 'emails-dead' AND c.id = copies.id AND copies.n = src.n`);
  await client.query(`VACUUM ANALYZE`);
  const [{ id: someId, queue: someQueue }] = (await client.query(`SELECT id::text, queue FROM stampeded_jobs WHERE queue = 'payments' LIMIT 1`)).rows;
  const after = { queue: 'emails', id: someId };
  // Halfway down the list's order: where a bounded scan resumes after 25 clicks.
  const [halfway] = (await client.query(`SELECT queue, id::text FROM stampeded_jobs ORDER BY queue DESC, id DESC OFFSET $1 LIMIT 1`, [Math.floor(total / 2)]))
    .rows;
  const {
    rows: [fp],
  } = await client.query(`SELECT encode(stampeded_fingerprint('connection reset by 10.0.0.1'), 'hex') AS hex`);
  const bound = (await client.query(`SELECT uuidv7()::text AS id`)).rows[0].id;
  const {
    rows: [fpTimeout],
  } = await client.query(`SELECT encode(stampeded_fingerprint('timeout after 1 ms'), 'hex') AS hex`);
  // A copy's id as the dead-letter lookup reads it: its time is the first 48 bits.
  const {
    rows: [copy],
  } = await client.query(`SELECT id::text AS id, source_id::text AS source_id FROM stampeded_jobs WHERE queue = 'emails-dead' AND state = 'available' LIMIT 1`);
  copy.at = parseInt(copy.id.replace(/-/g, '').slice(0, 12), 16);

  // The insights rollup: every finished job of the million read once, in
  // batches of 10,000, then one batch of 1,000 jobs finished since, as the
  // leader's tick finds them under a steady load.
  const rollup = (limit) => client.query(ROLLUP_INSIGHTS.text, [1, limit, INSIGHTS_HISTOGRAM.buckets, INSIGHTS_HISTOGRAM.perOctave, INSIGHTS_TOP_KEYS]);
  const batchMs = [];
  let rolled = 0;
  for (;;) {
    const t = performance.now();
    const {
      rows: [r],
    } = await rollup(10_000);
    batchMs.push(performance.now() - t);
    rolled += r.jobs;
    if (!r.more) break;
  }
  const sorted = [...batchMs].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)];
  console.log(
    `\ninsights rollup: ${rolled.toLocaleString('en')} finished jobs in ${batchMs.length} batches, ${(batchMs.reduce((a, b) => a + b, 0) / 1000).toFixed(1)} s; ` +
      `a batch of 10,000: median ${median.toFixed(0)} ms (${(median / 10).toFixed(1)} ms per 1,000 jobs)`,
  );
  await client.query(
    `INSERT INTO stampeded_jobs (queue, task, state, tenant_id, destination, finished_at, claimed_at, scheduled_at)
     SELECT (ARRAY['emails', 'payments', 'reports'])[1 + g % 3], 'task-' || (g % 20), 'completed', 'tenant-' || (g % 1000),
            CASE WHEN g % 10 = 0 THEN 'api-' || (g % 5) END, now(), now() - interval '40 ms', now() - interval '90 ms'
       FROM generate_series(1, 1000) g`,
  );
  const steady = [];
  for (let i = 0; i < 3; i++) {
    await client.query('BEGIN');
    const t = performance.now();
    const {
      rows: [r],
    } = await rollup(10_000);
    steady.push(performance.now() - t);
    await client.query('ROLLBACK');
    if (r.jobs !== 1000) throw new Error(`the steady batch read ${r.jobs} jobs, not 1,000`);
  }
  console.log(`insights rollup, steady: a batch of 1,000 jobs finished since, best of 3: ${Math.min(...steady).toFixed(1)} ms`);
  await client.query(`VACUUM ANALYZE stampeded_insights, stampeded_insight_keys`);

  const cases = [
    ['queues: counters', QUEUE_COUNTS.text, []],
    ['insights: an hour, one queue and task', INSIGHTS_POINTS.text, ['minute', 'emails', 'task-4', 59 * 60]],
    ['insights: a day, every queue', INSIGHTS_POINTS.text, ['hour', '', '', 23 * 3600]],
    ['insights: a week, every queue', INSIGHTS_POINTS.text, ['hour', '', '', 167 * 3600]],
    ['insights: busiest keys, a week', INSIGHTS_KEYS.text, ['', '', 168 * 3600, 10]],
    ['insights: filter names', INSIGHTS_NAMES.text, []],
    ['insights: watermark', INSIGHTS_WATERMARK.text, []],
    ['queues: verdicts and claim heads', QUEUE_STATE.text, []],
    ['queues: throughput, last hour', THROUGHPUT.text, [60]],
    ...[
      ['jobs: first page', {}],
      ['jobs: one queue', { queue: 'emails' }],
      ['jobs: queue + state', { queue: 'emails', state: 'available' }],
      ['jobs: deep page (cursor)', { after }],
      ['jobs: tenant', { tenant: 'tenant-7' }],
      ['jobs: destination + state', { destination: 'api-2', state: 'completed' }],
      ['jobs: task (rare state)', { task: 'task-1', state: 'retryable' }],
      ['jobs: rare state', { state: 'retryable' }],
      // A task alone has no index: each page is a bounded scan of the
      // primary key, 20,000 jobs at most. task-3 lives only in emails-dead,
      // after every reports job in the list's order: the first page reads its
      // whole budget and finds none, the most a page of it can cost; so does
      // task-2, which lives only in reports, from halfway down. From the
      // start, task-2 fills a page within its first 300 jobs.
      ['jobs: task, bounded scan, no match', { task: 'task-3' }],
      ['jobs: task, bounded scan, halfway', { task: 'task-2', after: halfway }],
      ['jobs: task, bounded scan, page found', { task: 'task-2' }],
      ['jobs: task + completed, bounded scan', { task: 'task-3', state: 'completed' }],
      // The searches. args, meta and an id's tail have no index: a bounded
      // scan, within the queue when one is given. One order in a million
      // reads the whole budget; half the jobs in a region fill a page at once.
      ['search: args {"orderId": n}, one match', { args: JSON.stringify({ orderId: total - 5 }) }],
      ['search: args {"region": "eu"}', { args: '{"region":"eu"}' }],
      ['search: args, one queue, one match', { queue: 'payments', args: JSON.stringify({ orderId: total - 7 }) }],
      ['search: meta, no match', { meta: '{"activejob":{}}' }],
      ["search: id's tail", { idTail: someId.slice(-12) }],
      ['search: whole id', { id: someId }],
      // Every failing job has one of two errors, numbers normalised out: a
      // fingerprint matches 20,000 jobs, read newest first from the failing
      // index; with a state that index does not hold, a bounded scan.
      ['search: fingerprint (20,000 failing)', { fingerprint: fpTimeout.hex.slice(0, 12) }],
      ['search: fingerprint + discarded + queue', { fingerprint: fpTimeout.hex.slice(0, 12), state: 'discarded', queue: 'emails' }],
      ['search: fingerprint + completed, bounded', { fingerprint: fpTimeout.hex.slice(0, 12), state: 'completed' }],
    ].map(([name, filters]) => {
      const { statement, values } = listJobsQuery(filters, 51, 20_000);
      return [name, statement.text, values];
    }),
    ['job: by id and queue', GET_JOB.text, [someId, someQueue]],
    // A job's related jobs: its dead-letter copy by a short range of the
    // dead-letter partition's key; its ordering key's neighbours, none here,
    // the most that walk can cost (10,000 jobs each way); dedup twins.
    [
      'related: dead-letter copy',
      DEAD_LETTER_COPY.text,
      ['emails-dead', copy.source_id, uuidv7Bound(new Date(copy.at - 1000), false), uuidv7Bound(new Date(copy.at + 60_000), true)],
    ],
    ['related: ordering key, none near', ORDERING_NEIGHBOURS.text, [someQueue, 'customer-1', someId, NEIGHBOUR_SCAN]],
    ['related: dedup twins', DEDUP_TWINS.text, [someQueue, 'digest:1', new Date(), 'day']],
    ['job: by id alone', GET_JOB.text, [someId, null]],
    ['errors by fingerprint', ERRORS_BY_FINGERPRINT.text, [null, 50]],
    ['workers', WORKERS.text, []],
    ['running jobs', RUNNING_JOBS.text, [200]],
    ['dlq redrive preview (all)', REDRIVE_PREVIEW.text, ['emails-dead', null, null, bound]],
    ['dlq redrive preview (fingerprint)', REDRIVE_PREVIEW.text, ['emails-dead', null, Buffer.from(fp.hex, 'hex'), bound]],
    // Run and rolled back: EXPLAIN ANALYZE moves the batch.
    ['dlq redrive batch of 1,000 (fp)', REDRIVE_BATCH.text, ['emails-dead', null, Buffer.from(fp.hex, 'hex'), bound, null, 1000], { rollback: true }],
  ];
  console.log(`\n${total.toLocaleString('en')} jobs. Execution time of each query (EXPLAIN ANALYZE), best of 3:\n`);
  console.log(`${'query'.padEnd(40)} ${'ms'.padStart(9)} ${'no-timing'.padStart(9)} ${'wall'.padStart(9)}  under 100 ms  index  plan`);
  for (const [name, text, values, how = {}] of cases) {
    const timed = await best(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${text}`, values, how);
    const untimed = await best(`EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ${text}`, values, how);
    const wall = await wallClock(text, values, how);
    console.log(
      `${name.padEnd(40)} ${timed.ms.toFixed(2).padStart(9)} ${untimed.ms.toFixed(2).padStart(9)} ${wall.toFixed(2).padStart(9)}  ${wall < 100 ? 'yes' : 'NO '}           ` +
        `${readsByIndex(timed.plan) ? 'yes' : 'NO '}    ${describe(timed.plan)}`,
    );
  }

  async function wallClock(text, values, { rollback = false }) {
    let ms = Infinity;
    for (let i = 0; i < 3; i++) {
      if (rollback) await client.query('BEGIN');
      const started = performance.now();
      await client.query(text, values);
      ms = Math.min(ms, performance.now() - started);
      if (rollback) await client.query('ROLLBACK');
    }
    return ms;
  }

  async function best(explain, values, { rollback = false }) {
    let result = { ms: Infinity, plan: null };
    for (let i = 0; i < 3; i++) {
      if (rollback) await client.query('BEGIN');
      const { rows } = await client.query(explain, values);
      if (rollback) await client.query('ROLLBACK');
      const plan = rows[0]['QUERY PLAN'][0];
      if (plan['Execution Time'] < result.ms) result = { ms: plan['Execution Time'], plan: plan.Plan };
    }
    return result;
  }
} finally {
  await client.end().catch(() => {});
  await db.drop();
  await server.stop();
}

/**
 * Whether every scan of a jobs partition in the plan goes through an index.
 * A query that reads only the counters or the workers table also answers
 * yes: it has no scan of the jobs to make.
 */
function readsByIndex(node) {
  if (node['Node Type'] === 'Seq Scan' && String(node['Relation Name'] ?? '').startsWith('stampeded_jobs')) return false;
  return (node.Plans ?? []).every(readsByIndex);
}

/** The node types and indexes of a plan, outermost first, in one line. */
function describe(node, out = []) {
  out.push(node['Index Name'] ? `${node['Node Type']}(${node['Index Name']})` : node['Node Type']);
  for (const child of node.Plans ?? []) describe(child, out);
  return [...new Set(out)].slice(0, 6).join(' > ');
}
