// The benchmark: Stampeded against pg-boss, graphile-worker and BullMQ 6 (on
// its PostgreSQL backend), on the same PostgreSQL 18, each run on a fresh
// database, each worker in a node process of its own.
//
//   npm run bench                 every scenario, three runs each
//   npm run bench -- --quick      fewer jobs, one run: for iterating
//   npm run bench -- --systems stampeded,graphile-worker --scenarios process
//
// PostgreSQL: DATABASE_URL when set, otherwise one started for the run
// (embedded, synchronous_commit on); `--pg 16` starts PostgreSQL 16 (or any
// of 14 to 18) from its binaries package instead, with the same initdb and
// settings for every major, to compare versions (bench/RESULTS.md). Numbers go to bench/out/ and, with
// --save, to bench/results/ (JSON and an SVG chart).
//
// How a processing run is measured, the same for every system:
// - after the jobs are loaded, ANALYZE (the statistics every real database
//   has within a minute of a load, which the claim queries are planned with)
//   and CHECKPOINT (every system starts with the same full-page-write state);
//   the bloat rows get a VACUUM ANALYZE before the load as well;
// - while the jobs are processed the parent sends no query: the worker
//   processes count what their handlers ran and report it over IPC. Once they
//   have run every job, the parent reads the system's tables every 20 ms
//   until nothing is pending, and that moment is the run's end (a system
//   that defers its completion writes pays for them);
// - the duration runs from the first handler call to that end; beside the
//   rate, the database's CPU per job (every PostgreSQL process) and its WAL
//   per job: bytes from pg_current_wal_lsn() read right before the start and
//   right after the end, records and full-page images from pg_stat_wal, read
//   once the workers have disconnected (backends flush their WAL statistics
//   at exit, or at most once a second), checked against the LSN difference.
import { fork } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startPostgres, createTestDatabase } from '@stampeded/testing';
import { startPostgresMajor } from '../test/support/postgres-major.mjs';
import { drawChart } from './chart.mjs';
import { flag, option } from './args.mjs';

const quick = flag('quick');
/** --pg 16: a PostgreSQL of that major (14 to 18) from its binaries package, started alike for every major, instead of startPostgres(). */
const PG_MAJOR = option('pg', undefined);
const RUNS = Number(option('runs', quick ? 1 : 3));
const SYSTEMS = option('systems', 'stampeded,graphile-worker,pg-boss,bullmq').split(',');
const SCENARIOS = option('scenarios', 'enqueue,process,removed,latency,snapshot,queues,bloat,unlogged').split(',');
/** Only the scenarios whose label contains this text, e.g. --only "c50, 4p". */
const ONLY = option('only', '');
const JOBS = Number(option('jobs', quick ? 10_000 : 50_000));
const SINGLE_JOBS = Number(option('single-jobs', quick ? 1_000 : 5_000));
const LATENCY_JOBS = Number(option('latency-jobs', quick ? 150 : 500));
const BLOAT_ROWS = Number(option('bloat-rows', quick ? 100_000 : 1_000_000));
/** The snapshot scenario: a steady SNAPSHOT_RATE jobs a second for this long, a snapshot held open throughout. */
const SNAPSHOT_SECONDS = Number(option('snapshot-seconds', quick ? 20 : 90));
const SNAPSHOT_RATE = Number(option('snapshot-rate', 4000));
/** --snapshot-hold off: the same steady run with no snapshot held, the baseline its latencies are read against. */
const SNAPSHOT_HOLD = option('snapshot-hold', 'on') !== 'off';
/** A system still working after this long is stopped and measured on what it finished. */
const MAX_SECONDS = Number(option('max-seconds', quick ? 20 : 40));
const now = () => performance.timeOrigin + performance.now();
const here = (p) => fileURLToPath(new URL(p, import.meta.url));

const systems = {};
for (const name of SYSTEMS) systems[name] = await import(`./systems/${name}.mjs`);

function log(line) {
  process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
}

// ---------------------------------------------------------------- processes

function spawn(system, url, options) {
  // STAMPEDED_BENCH_WORKER_NODE_ARGS="--cpu-prof" profiles the worker processes (diagnosis).
  const extra = options.mode === 'work' && process.env.STAMPEDED_BENCH_WORKER_NODE_ARGS ? process.env.STAMPEDED_BENCH_WORKER_NODE_ARGS.split(' ') : [];
  const child = fork(here('./child.mjs'), [system, url, JSON.stringify(options)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    execArgv: [...process.execArgv, ...extra],
    // Typed arrays (a steady run's latencies) cross as they are, not as JSON.
    serialization: 'advanced',
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  let onResult;
  const result = new Promise((resolve, reject) => {
    onResult = { resolve, reject };
    child.once('exit', (code) => reject(new Error(`${system} ${options.mode} process exited (${code}) before reporting`)));
  });
  const p = {
    child,
    result,
    exited,
    /** Jobs its handlers ran, as last reported; listeners hear every report. */
    handled: 0,
    target: options.target,
    listeners: new Set(),
    send: (m) => child.connected && child.send(m),
  };
  p.ready = new Promise((resolve) => {
    child.on('message', (m) => {
      if (m.ready) resolve();
      else if (m.result) onResult.resolve(m.result);
      else if (m.error) onResult.reject(new Error(`${system}: ${m.error}`));
      else if (typeof m.handled === 'number') {
        p.handled = m.handled;
        for (const listener of p.listeners) listener();
      }
    });
  });
  return p;
}

async function produce(system, url, options) {
  const p = spawn(system, url, options);
  await p.ready;
  p.send('start');
  const result = await p.result;
  await p.exited;
  return result;
}

/**
 * Resolves true once the workers together report `total` jobs handled, false
 * at `deadline`; rejects when one of them fails. With several processes, each
 * is told how many it would have to reach for the total to be reached by what
 * the others reported, so that the process that runs the last job reports it
 * at once rather than at its next 50 ms report.
 */
function waitHandled(workers, total, deadline) {
  return new Promise((resolve, reject) => {
    let settled = false;
    const finish = (outcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      for (const w of workers) w.listeners.delete(check);
      if (outcome instanceof Error) reject(outcome);
      else resolve(outcome);
    };
    const check = () => {
      const sum = workers.reduce((n, w) => n + w.handled, 0);
      if (sum >= total) return finish(true);
      for (const w of workers) {
        const target = total - (sum - w.handled);
        if (target !== w.target) {
          w.target = target;
          w.send({ target });
        }
      }
    };
    const timer = setTimeout(() => finish(false), Math.max(0, deadline - now()));
    for (const w of workers) {
      w.listeners.add(check);
      w.result.catch((err) => finish(err));
    }
    check();
  });
}

/** After every job was handled: the system's tables, every 20 ms, until nothing is pending (false at the deadline). */
async function untilNothingPending(checker, deadline) {
  while (await checker.anyPending()) {
    if (now() > deadline) return false;
    await sleep(20);
  }
  return true;
}

// ---------------------------------------------------------------- databases

let server;
async function freshDatabase(system, queues, { unlogged = false } = {}) {
  const db = await createTestDatabase(server.url, `bench_${system.replace(/\W/g, '_')}`);
  const installer = spawn(system, db.url, { mode: 'install', queues, unlogged });
  await installer.result;
  await installer.exited;
  return db;
}

async function sqlClient(url) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return client;
}

async function openChecker(system, url, queues) {
  const s = systems[system];
  if (s.openChecker) return s.openChecker(url, queues);
  const client = await sqlClient(url);
  return {
    anyPending: async () => (await client.query(s.anyPendingSql)).rows[0].any,
    pending: async () => (await client.query(s.pendingSql)).rows[0].n,
    completed: async () => (s.completedSql ? (await client.query(s.completedSql)).rows[0].n : null),
    close: () => client.end(),
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * The parent's own connection to a run's database: the statements after a
 * load, and the WAL readings around the run. The server is the run's alone
 * (one database at a time), so the server-wide figures are the run's.
 */
async function openMeter(url) {
  const client = await sqlClient(url);
  const one = async (sql, params) => (await client.query(sql, params)).rows[0];
  return {
    client,
    /** After a load: the statistics a real database has within a minute, and a checkpoint, so that every system starts with the same full-page-write state. */
    async settle() {
      await client.query('ANALYZE');
      await client.query('CHECKPOINT');
    },
    /**
     * Until no other client (and no autovacuum worker) is connected to the
     * database: a backend flushes its statistics before it leaves
     * pg_stat_activity. False when some are still there at the timeout.
     */
    async quiet(timeoutMs = 15_000) {
      const deadline = now() + timeoutMs;
      for (;;) {
        const { n } = await one(
          `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid()
              AND backend_type IN ('client backend', 'autovacuum worker')`,
        );
        if (n === 0) return true;
        if (now() > deadline) return false;
        await sleep(20);
      }
    },
    /** Records, full-page images and bytes between two LSNs, read from the WAL itself (pg_walinspect); { error } when it cannot be. */
    async walBetween(from, to) {
      try {
        await client.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
        const r = await one(`SELECT coalesce(sum(count), 0)::text AS records, coalesce(sum(combined_size), 0)::text AS bytes FROM pg_get_wal_stats($1, $2)`, [
          from,
          to,
        ]);
        const f = await one(`SELECT count(*)::text AS fpi FROM pg_get_wal_block_info($1, $2, false) WHERE block_fpi_length > 0`, [from, to]);
        return { records: Number(r.records), fpi: Number(f.fpi), bytes: Number(r.bytes) };
      } catch (err) {
        return { error: String(err?.message ?? err) };
      }
    },
    autovacuumRunning: async () =>
      (await one(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'autovacuum worker'`)).n > 0,
    lsn: async () => (await one('SELECT pg_current_wal_lsn()::text AS lsn')).lsn,
    lsnDiff: async (to, from) => Number((await one('SELECT pg_wal_lsn_diff($1, $2)::float8 AS d', [to, from])).d),
    /** pg_stat_wal with the current LSN; this backend's own statistics flushed first. */
    async walStats() {
      await client.query('SELECT pg_stat_force_next_flush()');
      return one(`SELECT wal_records::text AS records, wal_fpi::text AS fpi, wal_bytes::text AS bytes, pg_current_wal_lsn()::text AS lsn FROM pg_stat_wal`);
    },
    close: () => client.end(),
  };
}

/**
 * WAL per job over a run: bytes from the LSN at the start and at the end,
 * records and full-page images from pg_stat_wal. Other backends' WAL
 * statistics reach pg_stat_wal when they exit (or at most once a second while
 * busy), so this waits for every worker connection and autovacuum worker to
 * be gone, and a little more for the server's own processes. pg_stat_wal's
 * span is therefore a little longer than the run (the workers' shutdown,
 * an autovacuum of what the run left: afterEndBytes).
 *
 * The check: pg_stat_wal's bytes against the LSN difference over the same
 * span (a little lower is right: the LSN also advances over WAL page headers
 * and the padding that aligns each record), and its records and full-page
 * images against the WAL itself read with pg_walinspect (which also gives
 * them for the run's span exactly: `exact`).
 */
const WALINSPECT_MAX_BYTES = 256 * 2 ** 20;
async function walOver(meter, before, endLsn, jobs) {
  let quiet = await meter.quiet(30_000);
  await sleep(1100);
  // An autovacuum started meanwhile (of what the run left) is waited for as well.
  if (await meter.autovacuumRunning()) {
    quiet = await meter.quiet(30_000);
    await sleep(1100);
  }
  const after = await meter.walStats();
  const bytes = await meter.lsnDiff(endLsn, before.lsn);
  const lsnBytes = await meter.lsnDiff(after.lsn, before.lsn);
  const diff = (k) => Number(BigInt(after[k]) - BigInt(before[k]));
  const stat = { bytes: diff('bytes'), records: diff('records'), fpi: diff('fpi') };
  const inspected = now();
  // Reading the WAL takes about a second for 70 MB; longer spans (a long snapshot run) are not read.
  const run = lsnBytes > WALINSPECT_MAX_BYTES ? { error: `not read: ${Math.round(lsnBytes / 2 ** 20)} MB` } : await meter.walBetween(before.lsn, endLsn);
  const tail = run.error ? run : await meter.walBetween(endLsn, after.lsn);
  const walinspect = tail.error
    ? { error: tail.error }
    : { records: run.records + tail.records, fpi: run.fpi + tail.fpi, bytes: run.bytes + tail.bytes, ms: now() - inspected };
  const ratio = (a, b) => (b ? a / b : null);
  return {
    bytesPerJob: bytes / jobs,
    recordsPerJob: stat.records / jobs,
    fpiPerJob: stat.fpi / jobs,
    bytes,
    records: stat.records,
    fpi: stat.fpi,
    afterEndBytes: lsnBytes - bytes,
    exact: run.error ? null : { recordsPerJob: run.records / jobs, fpiPerJob: run.fpi / jobs, records: run.records, fpi: run.fpi },
    check: {
      quiet,
      lsnBytes,
      stat,
      walinspect,
      bytesVsLsn: ratio(stat.bytes, lsnBytes),
      recordsVsWal: walinspect.error ? null : ratio(stat.records, walinspect.records),
      fpiVsWal: walinspect.error ? null : ratio(stat.fpi, walinspect.fpi),
    },
  };
}

/**
 * CPU milliseconds spent so far by the benchmark's PostgreSQL: its postmaster,
 * the children it has reaped and the ones alive (Linux /proc; null elsewhere
 * or when the server is not on this machine). With the workers' own CPU, it
 * says where a job's time goes, the database or the worker.
 */
let postmasterPid;
function postgresCpuMs() {
  if (!postmasterPid) return null;
  const tick = 1000 / 100; // USER_HZ
  const stat = (pid) => {
    try {
      const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
      return text.slice(text.lastIndexOf(')') + 2).split(' ');
    } catch {
      return null;
    }
  };
  const own = stat(postmasterPid);
  if (!own) return null;
  // utime, stime, and the same for children already waited for.
  let total = (Number(own[11]) + Number(own[12]) + Number(own[13]) + Number(own[14])) * tick;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const fields = stat(pid);
    if (fields && Number(fields[1]) === postmasterPid) total += (Number(fields[11]) + Number(fields[12])) * tick;
  }
  return total;
}

async function findPostmaster(url) {
  try {
    const client = await sqlClient(url);
    const {
      rows: [{ dir }],
    } = await client.query(`SELECT current_setting('data_directory') AS dir`);
    await client.end();
    postmasterPid = Number(readFileSync(`${dir}/postmaster.pid`, 'utf8').split('\n')[0]);
  } catch {
    postmasterPid = undefined;
  }
}

const percentile = (sorted, p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : null);

// ---------------------------------------------------------------- scenarios

async function enqueueRun(system, mode, jobs) {
  const db = await freshDatabase(system, ['bench']);
  try {
    const { ms } = await produce(system, db.url, { mode, jobs, queues: ['bench'] });
    const checker = await openChecker(system, db.url, ['bench']);
    const stored = await checker.pending();
    await checker.close();
    if (stored !== jobs) throw new Error(`${system} ${mode}: ${stored} jobs stored, expected ${jobs}`);
    return { value: (jobs / ms) * 1000, ms };
  } finally {
    await db.drop();
  }
}

async function processRun(system, { jobs, concurrency, processes, queues = ['bench'], bloat = 0, unlogged = false, remove = false }) {
  const db = await freshDatabase(system, queues, { unlogged });
  const meter = await openMeter(db.url);
  const workers = [];
  try {
    if (bloat) {
      await systems[system].insertFinished(meter.client, bloat);
      await meter.client.query('VACUUM ANALYZE');
    }
    await produce(system, db.url, { mode: 'preload', jobs, queues, remove });
    // The workers load their libraries first, so that the start follows the
    // checkpoint closely (an autovacuum in between would take full-page
    // images out of the run).
    for (let i = 0; i < processes; i++) workers.push(spawn(system, db.url, { mode: 'work', concurrency, queues, target: jobs }));
    await Promise.all(workers.map((w) => w.ready));
    await meter.settle();
    // The installer's and the producer's backends gone, their WAL counted
    // before the start. An autovacuum of the loaded tables (the load passes
    // its insert threshold) running now would take the first full-page images
    // of the pages the run then writes: it is waited for, and checkpointed after.
    const autovacuumAfterLoad = await meter.autovacuumRunning();
    const quietBefore = await meter.quiet(60_000);
    if (autovacuumAfterLoad) await meter.client.query('CHECKPOINT');
    const checker = await openChecker(system, db.url, queues);
    const before = await meter.walStats();
    const dbCpuStart = postgresCpuMs();
    const started = now();
    const deadline = started + MAX_SECONDS * 1000;
    for (const w of workers) w.send('start');
    // No query while the jobs are processed: the workers say when they ran them all.
    const allHandled = await waitHandled(workers, jobs, deadline);
    const timedOut = !(allHandled && (await untilNothingPending(checker, deadline)));
    const ended = now();
    const dbCpuMs = dbCpuStart === null ? null : postgresCpuMs() - dbCpuStart;
    const endLsn = await meter.lsn();
    const left = timedOut ? await checker.pending() : 0;
    for (const w of workers) w.send('stop');
    const reports = await Promise.all(workers.map((w) => w.result));
    await Promise.all(workers.map((w) => w.exited));
    const completedRows = await checker.completed();
    await checker.close();
    const done = jobs - left;
    const handled = reports.reduce((n, r) => n + r.handled, 0);
    if (handled < done) throw new Error(`${system}: ${done} jobs finished but handlers ran only ${handled}`);
    const expectedRows = remove ? bloat : jobs + bloat;
    if (!timedOut && completedRows !== null && completedRows !== expectedRows) {
      throw new Error(`${system}: ${completedRows} jobs completed in the table, expected ${expectedRows}`);
    }
    const wal = await walOver(meter, before, endLsn, done);
    Object.assign(wal.check, { quietBefore, autovacuumAfterLoad });
    const firstAt = Math.min(...reports.map((r) => r.firstAt ?? Infinity));
    const seconds = (ended - firstAt) / 1000;
    const rssPeak = Math.max(...reports.flatMap((r) => r.rss)) / 2 ** 20;
    const workerCpuMs = reports.reduce((n, r) => n + (r.cpuMs ?? 0), 0);
    // Per job, in microseconds: the database's (every backend) and the workers' (from start to stop).
    const cpu = { dbUsPerJob: dbCpuMs === null ? null : (dbCpuMs * 1000) / done, workerUsPerJob: (workerCpuMs * 1000) / done };
    // From the last handler call to the end: the completions still to be written, and the 20 ms probes.
    const afterLastHandlerMs = ended - Math.max(...reports.map((r) => r.lastAt ?? -Infinity));
    return { value: done / seconds, seconds, done, timedOut, afterLastHandlerMs, rssPeakMb: rssPeak, cpu, wal };
  } finally {
    for (const w of workers) if (w.child.exitCode === null) w.child.kill();
    await meter.close().catch(() => {});
    await db.drop();
  }
}

async function latencyRun(system, jobs) {
  const db = await freshDatabase(system, ['bench']);
  const worker = spawn(system, db.url, { mode: 'work', concurrency: 10, queues: ['bench'], target: jobs });
  try {
    await worker.ready;
    const checker = await openChecker(system, db.url, ['bench']);
    worker.send('start');
    await sleep(1500); // idle, listening
    await produce(system, db.url, { mode: 'latency', jobs, intervalMs: 20, queues: ['bench'] });
    const deadline = now() + 30_000;
    if (await waitHandled([worker], jobs, deadline)) await untilNothingPending(checker, deadline);
    await checker.close();
    worker.send('stop');
    const report = await worker.result;
    const sorted = Float64Array.from(report.latencies).sort();
    if (sorted.length < jobs) throw new Error(`${system}: only ${sorted.length} of ${jobs} latency jobs ran`);
    const pct = (p) => percentile(sorted, p);
    return { value: pct(50), p50: pct(50), p95: pct(95), p99: pct(99), rssMb: Math.max(...report.rss) / 2 ** 20 };
  } finally {
    if (worker.child.exitCode === null) worker.child.kill();
    await db.drop();
  }
}

/**
 * Latency with a snapshot held open: one worker process at concurrency 10, a
 * producer process sending a steady SNAPSHOT_RATE jobs a second (each stamped
 * with the moment it was sent), and a third connection holding a REPEATABLE
 * READ snapshot from before the first job until after the last, as a long
 * report or a forgotten transaction does: no row a job leaves behind can be
 * removed while it is open. Insert-to-start latency per 10-second window (by
 * when the job started), so that what the dead rows do over time shows.
 */
async function snapshotRun(system, { seconds, rate }) {
  const db = await freshDatabase(system, ['bench']);
  const meter = await openMeter(db.url);
  const worker = spawn(system, db.url, { mode: 'work', concurrency: 10, queues: ['bench'] });
  const producer = spawn(system, db.url, { mode: 'steady', rate, seconds, queues: ['bench'] });
  let holder;
  try {
    await Promise.all([worker.ready, producer.ready]);
    const checker = await openChecker(system, db.url, ['bench']);
    worker.send('start');
    await sleep(1500); // idle, listening
    if (SNAPSHOT_HOLD) {
      holder = await sqlClient(db.url);
      await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await holder.query('SELECT count(*) FROM pg_class');
      const {
        rows: [{ xmin }],
      } = await meter.client.query('SELECT backend_xmin::text AS xmin FROM pg_stat_activity WHERE pid = $1', [holder.processID]);
      if (xmin === null) throw new Error('the snapshot holder has no xmin: no snapshot held');
    }
    const before = await meter.walStats();
    const dbCpuStart = postgresCpuMs();
    producer.send('start');
    const sent = await producer.result;
    await producer.exited;
    const deadline = now() + MAX_SECONDS * 1000;
    const allHandled = await waitHandled([worker], sent.sent, deadline);
    const timedOut = !(allHandled && (await untilNothingPending(checker, deadline)));
    const ended = now();
    const dbCpuMs = dbCpuStart === null ? null : postgresCpuMs() - dbCpuStart;
    const endLsn = await meter.lsn();
    if (holder) {
      await holder.query('COMMIT');
      await holder.end();
      holder = undefined;
    }
    const completedRows = await checker.completed();
    await checker.close();
    worker.send('stop');
    const report = await worker.result;
    await worker.exited;
    const done = report.latencies.length;
    if (!timedOut && done < sent.sent) throw new Error(`${system}: ${sent.sent} jobs sent, ${done} ran`);
    if (!timedOut && completedRows !== null && completedRows !== sent.sent) {
      throw new Error(`${system}: ${completedRows} jobs completed in the table, ${sent.sent} sent`);
    }
    const wal = await walOver(meter, before, endLsn, done);
    const windows = latencyWindows(report.latencies, report.startedAt, sent.startedAt, seconds);
    const sorted = Float64Array.from(report.latencies).sort();
    const lastFull = windows.filter((w) => !w.drain).at(-1);
    const first = windows[0];
    const keptUp = sent.sent >= 0.98 * sent.intended;
    return {
      value: percentile(sorted, 99),
      p50: percentile(sorted, 50),
      p99: percentile(sorted, 99),
      firstP50: first?.p50,
      firstP99: first?.p99,
      lastP50: lastFull?.p50,
      lastP99: lastFull?.p99,
      throughput: done / ((ended - report.firstAt) / 1000),
      done,
      timedOut,
      windows,
      producer: { ...sent, keptUp },
      rssMb: Math.max(...report.rss) / 2 ** 20,
      cpu: { dbUsPerJob: dbCpuMs === null ? null : (dbCpuMs * 1000) / done, workerUsPerJob: (report.cpuMs * 1000) / done },
      wal,
    };
  } finally {
    if (holder) await holder.end().catch(() => {});
    for (const c of [worker, producer]) if (c.child.exitCode === null) c.child.kill();
    await meter.close().catch(() => {});
    await db.drop();
  }
}

/** p50 and p99 of the jobs that started in each 10-second window from t0; windows from `seconds` on are the drain after the producer stopped. */
function latencyWindows(latencies, startedAt, t0, seconds) {
  const buckets = [];
  for (let i = 0; i < latencies.length; i++) {
    const w = Math.max(0, Math.floor((startedAt[i] - t0) / 10_000));
    (buckets[w] ??= []).push(latencies[i]);
  }
  const out = [];
  buckets.forEach((xs, w) => {
    const sorted = Float64Array.from(xs).sort();
    out.push({ from: w * 10, to: (w + 1) * 10, jobs: xs.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99), drain: w * 10 >= seconds });
  });
  return out;
}

// ---------------------------------------------------------------- plan

const plan = [];
const add = (scenario, label, unit, better, run, extra = {}) => {
  if (!ONLY || label.includes(ONLY)) plan.push({ scenario, label, unit, better, run, ...extra });
};
if (SCENARIOS.includes('enqueue')) {
  add('enqueue', `bulk enqueue ${JOBS}`, 'jobs/s', 'higher', (s) => enqueueRun(s, 'enqueue-bulk', JOBS));
  add('enqueue', `single enqueue ${SINGLE_JOBS}`, 'jobs/s', 'higher', (s) => enqueueRun(s, 'enqueue-single', SINGLE_JOBS));
}
if (SCENARIOS.includes('process')) {
  for (const processes of [1, 4]) {
    for (const concurrency of [10, 50]) {
      add('process', `process ${JOBS}, c${concurrency}, ${processes}p`, 'jobs/s', 'higher', (s) => processRun(s, { jobs: JOBS, concurrency, processes }), {
        concurrency,
        processes,
      });
    }
  }
}
if (SCENARIOS.includes('removed')) {
  // Completed jobs deleted instead of kept: Stampeded's removeOnComplete
  // beside graphile-worker, which always deletes a completed job.
  for (const concurrency of [10, 50]) {
    add(
      'removed',
      `process ${JOBS}, c${concurrency}, 1p, completed jobs removed`,
      'jobs/s',
      'higher',
      (s) => (systems[s].removesCompleted ? processRun(s, { jobs: JOBS, concurrency, processes: 1, remove: true }) : null),
      { concurrency, processes: 1 },
    );
  }
}
if (SCENARIOS.includes('latency')) {
  add('latency', `latency p50 (1 job / 20 ms)`, 'ms', 'lower', (s) => latencyRun(s, LATENCY_JOBS), { percentiles: true });
}
if (SCENARIOS.includes('snapshot')) {
  // pg-boss and BullMQ are not run: in a quick run (process 10,000, c10, 1p)
  // pg-boss 10 handled 402 jobs/s (its fetch loop waits out the half second
  // polling interval after every batch) and BullMQ's PostgreSQL backend 279
  // (both stopped at the cut-off), a tenth of the 4,000 a second sent here:
  // their latencies would only measure a backlog growing from the first
  // second. A --snapshot-rate under 1,000 runs them too.
  const tooSlow = { 'pg-boss': true, bullmq: true };
  add(
    'snapshot',
    `latency ${SNAPSHOT_HOLD ? 'with a snapshot held open' : 'with no snapshot held (the baseline)'}, ${SNAPSHOT_RATE} jobs/s for ${SNAPSHOT_SECONDS} s, c10, 1p`,
    'ms',
    'lower',
    (s) => (tooSlow[s] && SNAPSHOT_RATE >= 1000 ? null : snapshotRun(s, { seconds: SNAPSHOT_SECONDS, rate: SNAPSHOT_RATE })),
    { concurrency: 10, processes: 1 },
  );
}
if (SCENARIOS.includes('queues')) {
  const queues = Array.from({ length: 10 }, (_, i) => `bench${i}`);
  add('queues', `process ${JOBS}, 10 queues, c50, 1p`, 'jobs/s', 'higher', (s) => processRun(s, { jobs: JOBS, concurrency: 50, processes: 1, queues }), {
    concurrency: 50,
    processes: 1,
  });
}
if (SCENARIOS.includes('bloat')) {
  add(
    'bloat',
    `process ${JOBS}, c10, 1p, ${BLOAT_ROWS} finished rows`,
    'jobs/s',
    'higher',
    (s) => (systems[s].insertFinished ? processRun(s, { jobs: JOBS, concurrency: 10, processes: 1, bloat: BLOAT_ROWS }) : null),
    { concurrency: 10, processes: 1 },
  );
}

if (SCENARIOS.includes('unlogged')) {
  // Stampeded only: the schema's per-queue durability switch, with the
  // counters unlogged too (the schema's notes: unlogging the jobs alone buys nothing).
  for (const [label, unlogged] of [
    ['logged queue', false],
    ['UNLOGGED queue + counters', true],
  ]) {
    add(
      'unlogged',
      `process ${JOBS}, c10, 1p, ${label}`,
      'jobs/s',
      'higher',
      (s) => (systems[s].supportsUnlogged ? processRun(s, { jobs: JOBS, concurrency: 10, processes: 1, unlogged }) : null),
      { concurrency: 10, processes: 1 },
    );
  }
}

/** What is summarised (median, min, max over the runs) for each system of a row. */
const SUMMARISED = {
  value: (r) => r.value,
  p50: (r) => r.p50,
  p95: (r) => r.p95,
  p99: (r) => r.p99,
  rssPeakMb: (r) => r.rssPeakMb,
  rssMb: (r) => r.rssMb,
  throughput: (r) => r.throughput,
  firstP50: (r) => r.firstP50,
  lastP50: (r) => r.lastP50,
  firstP99: (r) => r.firstP99,
  lastP99: (r) => r.lastP99,
  dbUsPerJob: (r) => r.cpu?.dbUsPerJob,
  walBytesPerJob: (r) => r.wal?.bytesPerJob,
  walRecordsPerJob: (r) => r.wal?.recordsPerJob,
  walFpiPerJob: (r) => r.wal?.fpiPerJob,
};

// ---------------------------------------------------------------- main

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

server = PG_MAJOR
  ? { ...(await startPostgresMajor(Number(PG_MAJOR), { maxConnections: 200 })), provider: `PostgreSQL ${PG_MAJOR} binaries` }
  : await startPostgres();
await findPostmaster(server.url);
const admin = await sqlClient(server.url);
const [{ server_version: pgVersion }] = (await admin.query('SHOW server_version')).rows;
const [{ synchronous_commit: syncCommit }] = (await admin.query('SHOW synchronous_commit')).rows;
await admin.end();

const machine = {
  cpus: os.cpus().length,
  cpu: os.cpus()[0]?.model,
  memoryGb: Math.round(os.totalmem() / 2 ** 30),
  node: process.version,
  postgres: pgVersion,
  postgresProvider: server.provider,
  synchronousCommit: syncCommit,
};
const versions = Object.fromEntries(Object.entries(systems).map(([k, s]) => [k, s.version]));
log(`PostgreSQL ${pgVersion} (${server.provider}), synchronous_commit=${syncCommit}; ${machine.cpus} cores; ${RUNS} run(s) each`);
for (const [k, s] of Object.entries(systems)) log(`  ${k} ${s.version}: ${JSON.stringify(s.settings({ concurrency: 50 }))}`);

const results = [];
try {
  for (const step of plan) {
    const row = { scenario: step.scenario, label: step.label, unit: step.unit, better: step.better, systems: {} };
    for (let run = 1; run <= RUNS; run++) {
      // Systems alternate within a run, so that drift in the machine falls on all of them.
      for (const system of SYSTEMS) {
        const out = await Promise.resolve()
          .then(() => step.run(system))
          .catch((err) => ({ error: String(err?.message ?? err) }));
        const entry = (row.systems[system] ??= { runs: [], settings: systems[system].settings({ concurrency: step.concurrency ?? 10 }) });
        if (out === null) {
          entry.notApplicable = true;
          if (run === 1) log(`${step.label} | ${system}: n/a`);
          continue;
        }
        entry.runs.push(out);
        if (out.error) log(`${step.label} | ${system} run ${run}: ERROR ${out.error}`);
        else log(`${step.label} | ${system} run ${run}: ${describe(step, out)}`);
      }
    }
    summarise(row);
    results.push(row);
    // So that a run cut short still leaves what it measured.
    mkdirSync(here('./out'), { recursive: true });
    writeFileSync(here('./out/partial.json'), JSON.stringify({ machine, versions, results }, null, 2));
  }
} finally {
  await server.stop();
}

function describe(step, out) {
  if (step.percentiles) return `p50 ${out.p50.toFixed(1)} ms, p95 ${out.p95.toFixed(1)} ms, p99 ${out.p99.toFixed(1)} ms`;
  const int = (x) => Math.round(x).toLocaleString('en-US');
  let s;
  if (step.scenario === 'snapshot') {
    const p = out.producer;
    s = `p50 ${out.p50.toFixed(1)} ms, p99 ${out.p99.toFixed(1)} ms, ${int(out.throughput)} jobs/s`;
    s += `; producer ${p.keptUp ? 'kept up' : 'DID NOT keep up'}: ${int(p.sent)} of ${int(p.intended)} jobs sent (${int(p.ratePerSecond)}/s), ${p.lateTicks} ticks late, max lag ${p.maxLagMs.toFixed(0)} ms`;
  } else {
    s = `${int(out.value)} ${step.unit}`;
  }
  if (out.rssPeakMb) s += `, peak RSS ${out.rssPeakMb.toFixed(0)} MB`;
  if (out.cpu) s += `, CPU per job: database ${out.cpu.dbUsPerJob?.toFixed(0) ?? '?'} us, workers ${out.cpu.workerUsPerJob.toFixed(0)} us`;
  if (out.wal) {
    const w = out.wal;
    s += `, WAL per job: ${int(w.bytesPerJob)} bytes, ${w.recordsPerJob.toFixed(1)} records, ${w.fpiPerJob.toFixed(2)} FPI`;
    // Statistics that did not reach pg_stat_wal would make the records and FPI wrong.
    const c = w.check;
    const off = (r, tolerance) => r === null || r === undefined || Math.abs(r - 1) > tolerance;
    const pct = (r) => (r === null || r === undefined ? '?' : `${(r * 100).toFixed(1)}%`);
    const problems = [];
    if (off(c.bytesVsLsn, 0.05)) problems.push(`bytes ${pct(c.bytesVsLsn)} of the LSN difference`);
    if (!c.walinspect.error && off(c.recordsVsWal, 0.01)) problems.push(`records ${pct(c.recordsVsWal)} of the WAL's`);
    if (!c.walinspect.error && off(c.fpiVsWal, 0.01)) problems.push(`full-page images ${pct(c.fpiVsWal)} of the WAL's`);
    if (!c.quiet || c.quietBefore === false) problems.push('connections or autovacuum still there when pg_stat_wal was read');
    if (problems.length) s += ` (WARNING: pg_stat_wal ${problems.join(', ')})`;
  }
  if (out.timedOut) {
    const when = step.scenario === 'snapshot' ? `${MAX_SECONDS} s after the producer stopped` : `after ${MAX_SECONDS} s`;
    s += ` (stopped ${when} with ${out.done} done)`;
  }
  if (out.windows) {
    s += `\n    ${out.windows.map((w) => `${w.from}-${w.to}s${w.drain ? ' (drain)' : ''} p50 ${w.p50.toFixed(1)} p99 ${w.p99.toFixed(1)}`).join(' | ')}`;
  }
  return s;
}

function summarise(row) {
  for (const entry of Object.values(row.systems)) {
    const ok = entry.runs.filter((r) => !r.error);
    if (!ok.length) continue;
    for (const [key, get] of Object.entries(SUMMARISED)) {
      const xs = ok.map(get).filter((x) => typeof x === 'number' && Number.isFinite(x));
      if (xs.length) entry[key] = { median: median(xs), min: Math.min(...xs), max: Math.max(...xs) };
    }
    entry.timedOut = ok.some((r) => r.timedOut);
  }
  const peers = Object.entries(row.systems).filter(([k, e]) => k !== 'stampeded' && e.value);
  const mine = row.systems.stampeded?.value?.median;
  if (mine !== undefined && peers.length) {
    const best = peers.reduce((a, b) =>
      row.better === 'higher' ? (b[1].value.median > a[1].value.median ? b : a) : b[1].value.median < a[1].value.median ? b : a,
    );
    row.fastestPeer = best[0];
    row.ratio = row.better === 'higher' ? mine / best[1].value.median : best[1].value.median / mine;
  }
}

// ---------------------------------------------------------------- output

const fmt = (x, unit) =>
  x === undefined ? '-' : unit === 'ms' || unit === '0.0' ? x.toFixed(1) : unit === '0.00' ? x.toFixed(2) : Math.round(x).toLocaleString('en-US');
function renderTable(results, SYSTEMS) {
  const lines = [];
  const header = ['scenario', ...SYSTEMS, 'stampeded / best peer'];
  lines.push(`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`);
  const cell = (e, key, unit) => {
    if (!e) return '-';
    if (e.notApplicable) return 'n/a';
    const v = e[key];
    if (!v) return e.runs.find((r) => r.error) ? 'error' : '-';
    return `${fmt(v.median, unit)} (${fmt(v.min, unit)}-${fmt(v.max, unit)})${e.timedOut ? '*' : ''}`;
  };
  /** Medians only, "a / b": two figures of one system in one cell. */
  const pair = (e, a, b, unit) => {
    if (!e) return '-';
    if (e.notApplicable) return 'n/a';
    if (!e[a] && !e[b]) return e.runs.find((r) => r.error) ? 'error' : '-';
    return `${fmt(e[a]?.median, unit)} / ${fmt(e[b]?.median, unit)}${e.timedOut ? '*' : ''}`;
  };
  /** The best peer's median divided by Stampeded's, for a lower-is-better key. */
  const lowerRatio = (row, key) => {
    const mine = row.systems.stampeded?.[key]?.median;
    const peers = Object.entries(row.systems)
      .filter(([k, e]) => k !== 'stampeded' && e[key])
      .map(([, e]) => e[key].median);
    return mine !== undefined && peers.length ? `${(Math.min(...peers) / mine).toFixed(2)}x` : '-';
  };
  const costRows = (row) => {
    if (!Object.values(row.systems).some((e) => e.dbUsPerJob || e.walBytesPerJob)) return;
    lines.push(`| database CPU per job (us) | ${SYSTEMS.map((s) => cell(row.systems[s], 'dbUsPerJob', 'us')).join(' | ')} | |`);
    lines.push(`| WAL per job (bytes) | ${SYSTEMS.map((s) => cell(row.systems[s], 'walBytesPerJob', 'bytes')).join(' | ')} | |`);
    lines.push(
      `| WAL records / full-page images per job | ${SYSTEMS.map((s) => pair(row.systems[s], 'walRecordsPerJob', 'walFpiPerJob', '0.00')).join(' | ')} | |`,
    );
  };
  for (const row of results) {
    if (row.scenario === 'latency') {
      for (const p of ['p50', 'p95', 'p99']) {
        lines.push(`| latency ${p} (ms) | ${SYSTEMS.map((s) => cell(row.systems[s], p, 'ms')).join(' | ')} | ${lowerRatio(row, p)} |`);
      }
      continue;
    }
    if (row.scenario === 'snapshot') {
      lines.push(`| ${row.label}: throughput (jobs/s) | ${SYSTEMS.map((s) => cell(row.systems[s], 'throughput', 'jobs/s')).join(' | ')} | |`);
      for (const p of ['p50', 'p99']) {
        const P = p.toUpperCase();
        lines.push(
          `| snapshot held: ${p} first 10 s / last 10 s (ms) | ${SYSTEMS.map((s) => pair(row.systems[s], `first${P}`, `last${P}`, 'ms')).join(' | ')} | ${lowerRatio(row, `last${P}`)} (last 10 s) |`,
        );
      }
      for (const p of ['p50', 'p99']) {
        lines.push(`| snapshot held: ${p} overall (ms) | ${SYSTEMS.map((s) => cell(row.systems[s], p, 'ms')).join(' | ')} | ${lowerRatio(row, p)} |`);
      }
      costRows(row);
      continue;
    }
    lines.push(
      `| ${row.label} (${row.unit}) | ${SYSTEMS.map((s) => cell(row.systems[s], 'value', row.unit)).join(' | ')} | ${row.ratio ? `${row.ratio.toFixed(2)}x vs ${row.fastestPeer}` : '-'} |`,
    );
    if (row.label.includes('c50, 1p') && row.scenario === 'process') {
      lines.push(`| worker peak RSS at c50 (MB) | ${SYSTEMS.map((s) => cell(row.systems[s], 'rssPeakMb', 'MB')).join(' | ')} | |`);
    }
    costRows(row);
  }
  return lines.join('\n');
}

const table = renderTable(results, SYSTEMS);
process.stdout.write(
  `\nmedian (min-max) of ${RUNS} run(s); ratio > 1 means Stampeded is ahead; * = stopped after ${MAX_SECONDS} s, rate of what finished\n\n${table}\n\n`,
);

const report = {
  at: new Date().toISOString(),
  quick,
  runs: RUNS,
  jobs: { process: JOBS, bulk: JOBS, single: SINGLE_JOBS, latency: LATENCY_JOBS, bloatRows: BLOAT_ROWS },
  snapshot: { seconds: SNAPSHOT_SECONDS, rate: SNAPSHOT_RATE },
  maxSeconds: MAX_SECONDS,
  machine,
  versions,
  settings: Object.fromEntries(Object.entries(systems).map(([k, s]) => [k, { c10: s.settings({ concurrency: 10 }), c50: s.settings({ concurrency: 50 }) }])),
  results,
  table,
};
mkdirSync(here('./out'), { recursive: true });
const stamp = report.at.replace(/[:.]/g, '-');
writeFileSync(here(`./out/results-${stamp}.json`), JSON.stringify(report, null, 2));
writeFileSync(here(`./out/chart-${stamp}.svg`), drawChart(report));
log(`wrote bench/out/results-${stamp}.json and chart-${stamp}.svg`);
if (flag('update')) {
  // Re-measured scenarios replace their rows in the saved results; the rest are kept.
  const saved = JSON.parse(readFileSync(here('./results/latest.json'), 'utf8'));
  const fresh = new Map(results.map((r) => [r.label, r]));
  const merged = saved.results.map((r) => fresh.get(r.label) ?? r);
  for (const r of results) if (!saved.results.some((x) => x.label === r.label)) merged.push(r);
  saved.results = merged;
  saved.updated = [...(saved.updated ?? []), { at: report.at, labels: results.map((r) => r.label), runs: RUNS }];
  saved.table = renderTable(merged, Object.keys(saved.versions));
  writeFileSync(here('./results/latest.json'), JSON.stringify(saved, null, 2));
  writeFileSync(here('./results/chart.svg'), drawChart(saved));
  process.stdout.write(`\nsaved results with these scenarios replaced:\n\n${saved.table}\n\n`);
} else if (flag('save')) {
  writeFileSync(here('./results/latest.json'), JSON.stringify(report, null, 2));
  writeFileSync(here('./results/chart.svg'), drawChart(report));
  log('saved to bench/results/latest.json and bench/results/chart.svg');
}
