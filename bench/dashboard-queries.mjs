// Times every query the dashboard and the CLI run, on a table of 1,000,000
// jobs, and prints each one's plan head: the number to read is the
// execution time, which should stay under 100 ms however large the table.
// Not a test: `npm run build && node bench/dashboard-queries.mjs [jobs]`.
// Uses DATABASE_URL when set, otherwise starts an embedded PostgreSQL 18.
import pg from 'pg';
import { startPostgres, createTestDatabase } from '@stampeded/testing';
import { migrate } from '@stampeded/nestjs';
import { listJobsQuery, GET_JOB, ERRORS_BY_FINGERPRINT, THROUGHPUT } from '../libs/dashboard/dist/sql/jobs.sql.js';
import { QUEUE_COUNTS, QUEUE_STATE } from '../libs/dashboard/dist/sql/queues.sql.js';
import { RUNNING_JOBS, WORKERS } from '../libs/dashboard/dist/sql/workers.sql.js';
import { REDRIVE_PREVIEW } from '../libs/dashboard/dist/sql/dead-letters.sql.js';

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
      `INSERT INTO stampeded_jobs (queue, task, state, tenant_id, destination, finished_at, error_fingerprint, last_error, source_id, source_queue, scheduled_at)
       SELECT (ARRAY['emails', 'payments', 'reports', 'emails-dead'])[1 + g % 4], 'task-' || (g % 20),
              CASE WHEN g % 100 = 0 THEN 'available' WHEN g % 100 = 1 THEN 'retryable' WHEN g % 100 = 2 THEN 'discarded' ELSE 'completed' END,
              'tenant-' || (g % 1000), CASE WHEN g % 10 = 0 THEN 'api-' || (g % 5) END,
              CASE WHEN g % 100 >= 2 THEN now() - make_interval(secs => (g % 7200)) END,
              CASE WHEN g % 100 IN (1, 2) THEN stampeded_fingerprint('timeout after ' || (g % 50) || ' ms') END,
              CASE WHEN g % 100 IN (1, 2) THEN 'timeout after ' || (g % 50) || ' ms' END,
              CASE WHEN g % 4 = 3 THEN uuidv7() END, CASE WHEN g % 4 = 3 THEN 'emails' END,
              now() - make_interval(secs => (g % 600))
         FROM generate_series($1::int, $2::int) g`,
      [from, Math.min(total, from + batch - 1)],
    );
    process.stderr.write(`\rinserted ${Math.min(total, from + batch - 1)} of ${total} jobs`);
  }
  process.stderr.write(` in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  await client.query(`VACUUM ANALYZE`);
  const [{ id: someId, queue: someQueue }] = (await client.query(`SELECT id::text, queue FROM stampeded_jobs WHERE queue = 'payments' LIMIT 1`)).rows;
  const after = { queue: 'emails', id: someId };
  const { rows: [fp] } = await client.query(`SELECT encode(error_fingerprint, 'hex') AS hex FROM stampeded_jobs WHERE error_fingerprint IS NOT NULL LIMIT 1`);

  const cases = [
    ['queues: counters', QUEUE_COUNTS.text, []],
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
      ['jobs: task', { task: 'task-3' }],
    ].map(([name, filters]) => {
      const { statement, values } = listJobsQuery(filters, 51);
      return [name, statement.text, values];
    }),
    ['job: by id and queue', GET_JOB.text, [someId, someQueue]],
    ['job: by id alone', GET_JOB.text, [someId, null]],
    ['errors by fingerprint', ERRORS_BY_FINGERPRINT.text, [null, 50]],
    ['workers', WORKERS.text, []],
    ['running jobs', RUNNING_JOBS.text, [200]],
    ['dlq redrive preview (fingerprint)', REDRIVE_PREVIEW.text, ['emails-dead', null, Buffer.from(fp.hex, 'hex')]],
  ];
  console.log(`\n${total.toLocaleString('en')} jobs. Execution time of each query (EXPLAIN ANALYZE), best of 3:\n`);
  console.log(`${'query'.padEnd(36)} ${'ms'.padStart(9)}  under 100 ms  plan`);
  for (const [name, text, values] of cases) {
    let best = Infinity;
    let planText = '';
    for (let i = 0; i < 3; i++) {
      const { rows } = await client.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${text}`, values);
      const plan = rows[0]['QUERY PLAN'][0];
      if (plan['Execution Time'] < best) {
        best = plan['Execution Time'];
        planText = describe(plan.Plan);
      }
    }
    console.log(`${name.padEnd(36)} ${best.toFixed(2).padStart(9)}  ${best < 100 ? 'yes' : 'NO '}           ${planText}`);
  }
} finally {
  await client.end().catch(() => {});
  await db.drop();
  await server.stop();
}

/** The node types and indexes of a plan, outermost first, in one line. */
function describe(node, out = []) {
  out.push(node['Index Name'] ? `${node['Node Type']}(${node['Index Name']})` : node['Node Type']);
  for (const child of node.Plans ?? []) describe(child, out);
  return [...new Set(out)].slice(0, 6).join(' > ');
}
