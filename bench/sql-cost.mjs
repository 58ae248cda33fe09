// What the database spends on a job's claim and completion, statement by
// statement, with no worker in the way: one connection claims a batch with
// the worker's claim function, completes it with the worker's completion
// function, and goes on until the queue is empty. Prints, per job, the time
// each statement took, the WAL it wrote (bytes, records, full-page images)
// and the buffers it touched, from pg_stat_statements (every statement,
// those inside functions and triggers included), and the plan of one
// mid-run batch with EXPLAIN (ANALYZE, BUFFERS, WAL) through auto_explain.
//
//   node bench/sql-cost.mjs                      50,000 jobs, batches of 500
//   node bench/sql-cost.mjs --jobs 20000 --batch 200 --remove
//
// --remove enqueues the jobs with removeOnComplete (deleted when they
// complete); --results completes each job with a small result
// ({"ok":true,"n":<i>}, as a handler's return value is stored); --events
// completes with the statement that also notifies the fleet of the outcomes
// (events: 'fleet', while a process listens), a connection LISTENing to
// them; --keyed gives every job an ordering key of its own (each the head
// of its key's line, so every claim runs the per-key turn check on each
// job it takes); --plans prints the plans; --pg 16 runs on PostgreSQL 16 (14 to 18); --setup "SQL" runs SQL before the load
// (an experiment); --plain runs without pg_stat_statements, whose tracking
// of every nested statement adds a fixed cost to each call (the backend's
// CPU as a real install spends it, for small batches; no per-statement
// table then); STAMPEDED_SQL_COST_PID=1 prints the backend's pid, to
// attach a profiler to it. PostgreSQL: DATABASE_URL when set (it needs pg_stat_statements
// in shared_preload_libraries), otherwise one started for the run.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { startPostgres, createTestDatabase } from '@stampeded/testing';
import { startPostgresMajor } from '../test/support/postgres-major.mjs';
import { migrate } from '@stampeded/nestjs';
import { COMPLETE_MANY_NOTIFY, eventsChannel } from '@stampeded/nestjs/internal';
import { args, option } from './args.mjs';

const JOBS = Number(option('jobs', 50_000));
const BATCH = Number(option('batch', 500));
const REMOVE = args.includes('--remove');
const RESULTS = args.includes('--results');
const EVENTS = args.includes('--events');
const KEYED = args.includes('--keyed');
const FINISHED = Number(option('finished', 0));

const PLAIN = args.includes('--plain');
const STATEMENTS = PLAIN ? {} : { shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track': 'all' };
// --pg 16: that major (14 to 18) from its binaries package, the same initdb and settings for each, to compare versions.
const server = option('pg') ? await startPostgresMajor(Number(option('pg')), { settings: STATEMENTS }) : await startPostgres({ settings: STATEMENTS });
const db = await createTestDatabase(server.url, 'sql_cost');
const client = new pg.Client({ connectionString: db.url });
await client.connect();
const q = (text, params) => client.query(text, params);
let listener;

try {
  await migrate(db.url);
  if (!PLAIN) await q(`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`);
  await q(`SELECT stampeded_create_queue('bench')`);
  // Experiments: --setup "ALTER TABLE stampeded_jobs_bench SET (fillfactor = 50)" runs SQL before the load.
  if (option('setup')) await q(option('setup'));
  if (FINISHED) {
    await q(
      `INSERT INTO stampeded_jobs (queue, task, state, attempt, finished_at, args)
             SELECT 'bench', 'noop', 'completed', 1, now() - interval '10 minutes', jsonb_build_object('i', g)
               FROM generate_series(1, $1) g`,
      [FINISHED],
    );
  }
  for (let i = 0; i < JOBS; i += 5000) {
    const n = Math.min(5000, JOBS - i);
    await q(
      `INSERT INTO stampeded_jobs (id, queue, task, args, remove_on_complete, ordering_key, ordering_position)
             SELECT u.id, 'bench', 'noop', jsonb_build_object('i', u.g), $2, CASE WHEN $3 THEN 'k' || ($4 + u.g) END, CASE WHEN $3 THEN u.id END
               FROM (SELECT uuidv7() AS id, g FROM generate_series(1, $1) g) u`,
      [n, REMOVE, KEYED, i],
    );
  }
  await q('VACUUM ANALYZE');
  await q('CHECKPOINT');
  if (!PLAIN) await q('SELECT pg_stat_statements_reset()');
  const worker = randomUUID();
  // What a fleet with events: 'fleet' has: a connection that hears them.
  let heard = 0;
  if (EVENTS) {
    listener = new pg.Client({ connectionString: db.url });
    await listener.connect();
    listener.on('notification', () => heard++);
    await listener.query(`LISTEN ${JSON.stringify(eventsChannel('public'))}`);
  }
  // The backend's own CPU time (Linux /proc, the server on this machine): less
  // disturbed by other load than the statements' wall time.
  const backendPid = (await q('SELECT pg_backend_pid() AS p')).rows[0].p;
  if (process.env.STAMPEDED_SQL_COST_PID) console.log(`backend pid ${backendPid}`);
  const cpuMs = () => {
    try {
      const f = readFileSync(`/proc/${backendPid}/stat`, 'utf8');
      const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
      return (Number(rest[11]) + Number(rest[12])) * 10;
    } catch {
      return NaN;
    }
  };
  const cpu0 = cpuMs();
  const lsn0 = (await q('SELECT pg_current_wal_lsn() AS l')).rows[0].l;
  const started = performance.now();
  let claimMs = 0;
  let completeMs = 0;
  let done = 0;
  let plans = null;
  const explain = async (on) => {
    if (on) {
      await q(`LOAD 'auto_explain'`);
      await q(`SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on; SET auto_explain.log_buffers = on;
               SET auto_explain.log_wal = on; SET auto_explain.log_nested_statements = on; SET auto_explain.log_timing = off;
               SET auto_explain.log_format = text; SET auto_explain.log_parameter_max_length = 0; SET auto_explain.log_level = notice`);
      plans = [];
      client.on('notice', (n) => plans.push(n.message));
    } else {
      await q('SET auto_explain.log_min_duration = -1');
      client.removeAllListeners('notice');
    }
  };
  for (;;) {
    // One batch half-way through is explained, its claim and its completion.
    const midway = plans === null && done >= JOBS / 2;
    if (midway) await explain(true);
    let t = performance.now();
    const claimed = await q('SELECT id, queue, attempt, task FROM stampeded_claim_batch($1, $2, $3)', ['bench', worker, BATCH]);
    claimMs += performance.now() - t;
    if (!claimed.rowCount) break;
    t = performance.now();
    // As the worker sends it: the results NULL when no job of the batch has one.
    const values = [
      worker,
      claimed.rows.map((r) => r.queue),
      claimed.rows.map((r) => r.id),
      claimed.rows.map((r) => r.attempt),
      RESULTS ? claimed.rows.map((_, i) => JSON.stringify({ ok: true, n: done + i })) : null,
    ];
    const completed = EVENTS
      ? await q(COMPLETE_MANY_NOTIFY.text, [...values, claimed.rows.map((r) => r.task), eventsChannel('public')]).then((r) => ({
          rowCount: r.rows.filter((row) => row.id !== null).length,
        }))
      : await q('SELECT id FROM stampeded_complete_many($1, $2::text[], $3::uuid[], $4::smallint[], $5::jsonb[])', values);
    completeMs += performance.now() - t;
    if (midway) await explain(false);
    if (completed.rowCount !== claimed.rowCount) throw new Error(`completed ${completed.rowCount} of ${claimed.rowCount}`);
    done += completed.rowCount;
  }
  const seconds = (performance.now() - started) / 1000;
  const backendCpuMs = cpuMs() - cpu0;
  const rowBytes = (await q(`SELECT avg(pg_column_size(j.*))::int AS b, pg_relation_size('stampeded_jobs_bench') / 8192 AS pages FROM stampeded_jobs_bench j`))
    .rows[0];
  const lsn1 = (await q('SELECT pg_current_wal_lsn() AS l')).rows[0].l;
  await q('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
  const walKinds = (
    await q(
      `SELECT "resource_manager/record_type" AS kind, count, record_size, fpi_size
                               FROM pg_get_wal_stats($1, $2, true) WHERE count > 0 ORDER BY record_size + fpi_size DESC LIMIT 12`,
      [lsn0, lsn1],
    )
  ).rows;
  const wal = Number((await q('SELECT pg_wal_lsn_diff($1, $2) AS d', [lsn1, lsn0])).rows[0].d);
  if (done !== JOBS) throw new Error(`processed ${done} of ${JOBS}`);

  const counts = (await q(`SELECT state, sum(n)::int AS n FROM stampeded_queue_counts GROUP BY state HAVING sum(n) <> 0 ORDER BY 1`)).rows;
  const actual = (await q(`SELECT state, count(*)::int AS n FROM stampeded_jobs GROUP BY state ORDER BY 1`)).rows;
  const exact = JSON.stringify(counts) === JSON.stringify(actual);

  const per = (x) => (x / JOBS).toFixed(2);
  console.log(
    `${JOBS} jobs in batches of ${BATCH}${REMOVE ? ', removed on completion' : ''}${RESULTS ? ', with results' : ''}${KEYED ? ', each with an ordering key' : ''}${EVENTS ? `, events notified (${heard} notifications heard)` : ''}${FINISHED ? `, ${FINISHED} finished rows` : ''}: ${(JOBS / seconds).toFixed(0)} jobs/s on one connection`,
  );
  console.log(
    `  claim ${((claimMs * 1000) / JOBS).toFixed(1)} us a job, completion ${((completeMs * 1000) / JOBS).toFixed(1)} us a job (wall, round trips included)`,
  );
  console.log(`  backend CPU ${((backendCpuMs * 1000) / JOBS).toFixed(1)} us a job (claim and completion together)`);
  console.log(`  rows ${rowBytes.b} bytes, partition ${rowBytes.pages} pages`);
  console.log(
    `  WAL ${(wal / JOBS).toFixed(0)} bytes a job; counters exact: ${exact}${exact ? '' : ` (${JSON.stringify(counts)} vs ${JSON.stringify(actual)})`}`,
  );
  const stats = PLAIN
    ? []
    : (
        await q(`
    SELECT regexp_replace(left(query, 90), '\\s+', ' ', 'g') AS query, calls, total_exec_time AS ms, wal_bytes, wal_records, wal_fpi,
           shared_blks_hit + shared_blks_read AS blks, shared_blks_dirtied AS dirtied, toplevel
      FROM pg_stat_statements
     WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND calls >= 10
     ORDER BY total_exec_time DESC LIMIT 12`)
      ).rows;
  if (!PLAIN) console.log('  per job:        us    WAL B  records   FPI   buffers dirtied  statement');
  for (const s of stats) {
    console.log(
      `  ${s.toplevel ? 'top   ' : 'nested'} ${((s.ms * 1000) / JOBS).toFixed(1).padStart(9)} ${per(Number(s.wal_bytes)).padStart(8)} ${per(Number(s.wal_records)).padStart(8)} ${per(Number(s.wal_fpi)).padStart(5)} ${per(Number(s.blks)).padStart(9)} ${per(Number(s.dirtied)).padStart(7)}  ${s.query}`,
    );
  }
  console.log('  WAL by record type, per job:  count   bytes   FPI bytes');
  for (const k of walKinds)
    console.log(
      `    ${k.kind.padEnd(26)} ${per(Number(k.count)).padStart(6)} ${per(Number(k.record_size)).padStart(7)} ${per(Number(k.fpi_size)).padStart(9)}`,
    );
  if (args.includes('--plans') && plans) for (const p of plans) console.log(`\n${p}`);
} finally {
  await listener?.end();
  await client.end();
  await db.drop();
  await server.stop();
}
