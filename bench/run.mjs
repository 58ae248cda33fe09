// The benchmark: Stampeded against pg-boss, graphile-worker and BullMQ 6 (on
// its PostgreSQL backend), on the same PostgreSQL 18, each run on a fresh
// database, each worker in a node process of its own.
//
//   npm run bench                 every scenario, three runs each
//   npm run bench -- --quick      fewer jobs, one run: for iterating
//   npm run bench -- --systems stampeded,graphile-worker --scenarios process
//
// PostgreSQL: DATABASE_URL when set, otherwise one started for the run
// (embedded, synchronous_commit on). Numbers go to bench/out/ and, with
// --save, to bench/results/ (JSON and an SVG chart).
import { fork } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startPostgres, createTestDatabase } from '@stampeded/testing';
import { drawChart } from './chart.mjs';

const args = process.argv.slice(2);
const flag = (name) => args.includes(`--${name}`);
const option = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const quick = flag('quick');
const RUNS = Number(option('runs', quick ? 1 : 3));
const SYSTEMS = option('systems', 'stampeded,graphile-worker,pg-boss,bullmq').split(',');
const SCENARIOS = option('scenarios', 'enqueue,process,latency,queues,bloat,unlogged').split(',');
/** Only the scenarios whose label contains this text, e.g. --only "c50, 4p". */
const ONLY = option('only', '');
const JOBS = Number(option('jobs', quick ? 10_000 : 50_000));
const SINGLE_JOBS = Number(option('single-jobs', quick ? 1_000 : 5_000));
const LATENCY_JOBS = Number(option('latency-jobs', quick ? 150 : 500));
const BLOAT_ROWS = Number(option('bloat-rows', quick ? 100_000 : 1_000_000));
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
  });
  let onResult;
  const result = new Promise((resolve, reject) => {
    onResult = { resolve, reject };
    child.once('exit', (code) => reject(new Error(`${system} ${options.mode} process exited (${code}) before reporting`)));
  });
  const ready = new Promise((resolve) => {
    child.on('message', (m) => {
      if (m.ready) resolve();
      else if (m.result) onResult.resolve(m.result);
      else if (m.error) onResult.reject(new Error(`${system}: ${m.error}`));
    });
  });
  return { child, ready, result, send: (m) => child.send(m) };
}

async function produce(system, url, options) {
  const p = spawn(system, url, options);
  await p.ready;
  p.send('start');
  return p.result;
}

// ---------------------------------------------------------------- databases

let server;
async function freshDatabase(system, queues, { unlogged = false } = {}) {
  const db = await createTestDatabase(server.url, `bench_${system.replace(/\W/g, '_')}`);
  const installer = spawn(system, db.url, { mode: 'install', queues, unlogged });
  await installer.result;
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
    const { rows: [{ dir }] } = await client.query(`SELECT current_setting('data_directory') AS dir`);
    await client.end();
    postmasterPid = Number(readFileSync(`${dir}/postmaster.pid`, 'utf8').split('\n')[0]);
  } catch {
    postmasterPid = undefined;
  }
}

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

async function processRun(system, { jobs, concurrency, processes, queues = ['bench'], bloat = 0, unlogged = false }) {
  const db = await freshDatabase(system, queues, { unlogged });
  try {
    if (bloat) {
      const client = await sqlClient(db.url);
      await systems[system].insertFinished(client, bloat);
      await client.query('VACUUM ANALYZE');
      await client.end();
    }
    await produce(system, db.url, { mode: 'preload', jobs, queues });
    const checker = await openChecker(system, db.url, queues);
    const workers = Array.from({ length: processes }, () => spawn(system, db.url, { mode: 'work', concurrency, queues }));
    await Promise.all(workers.map((w) => w.ready));
    const started = now();
    const dbCpuStart = postgresCpuMs();
    for (const w of workers) w.send('start');
    let timedOut = false;
    while (await checker.anyPending()) {
      if (now() - started > MAX_SECONDS * 1000) {
        timedOut = true;
        break;
      }
      await sleep(20);
    }
    const ended = now();
    const dbCpuMs = dbCpuStart === null ? null : postgresCpuMs() - dbCpuStart;
    const left = timedOut ? await checker.pending() : 0;
    for (const w of workers) w.send('stop');
    const reports = await Promise.all(workers.map((w) => w.result));
    const completedRows = await checker.completed();
    await checker.close();
    const done = jobs - left;
    const handled = reports.reduce((n, r) => n + r.handled, 0);
    if (handled < done) throw new Error(`${system}: ${done} jobs finished but handlers ran only ${handled}`);
    if (!timedOut && completedRows !== null && completedRows !== jobs + bloat) {
      throw new Error(`${system}: ${completedRows} jobs completed in the table, expected ${jobs + bloat}`);
    }
    const firstAt = Math.min(...reports.map((r) => r.firstAt ?? Infinity));
    const seconds = (ended - firstAt) / 1000;
    const rssPeak = Math.max(...reports.flatMap((r) => r.rss)) / 2 ** 20;
    const workerCpuMs = reports.reduce((n, r) => n + (r.cpuMs ?? 0), 0);
    // Per job, in microseconds: the database's (every backend, the checker's
    // polling included) and the workers' (from start to stop).
    const cpu = { dbUsPerJob: dbCpuMs === null ? null : (dbCpuMs * 1000) / done, workerUsPerJob: (workerCpuMs * 1000) / done };
    return { value: done / seconds, seconds, done, timedOut, rssPeakMb: rssPeak, cpu };
  } finally {
    await db.drop();
  }
}

async function latencyRun(system, jobs) {
  const db = await freshDatabase(system, ['bench']);
  try {
    const worker = spawn(system, db.url, { mode: 'work', concurrency: 10, queues: ['bench'] });
    await worker.ready;
    worker.send('start');
    await sleep(1500); // idle, listening
    await produce(system, db.url, { mode: 'latency', jobs, intervalMs: 20, queues: ['bench'] });
    const checker = await openChecker(system, db.url, ['bench']);
    const deadline = now() + 30_000;
    while ((await checker.anyPending()) && now() < deadline) await sleep(20);
    await checker.close();
    worker.send('stop');
    const report = await worker.result;
    const sorted = report.latencies.sort((a, b) => a - b);
    if (sorted.length < jobs) throw new Error(`${system}: only ${sorted.length} of ${jobs} latency jobs ran`);
    const pct = (p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
    return { value: pct(50), p50: pct(50), p95: pct(95), p99: pct(99), rssMb: Math.max(...report.rss) / 2 ** 20 };
  } finally {
    await db.drop();
  }
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
      add('process', `process ${JOBS}, c${concurrency}, ${processes}p`, 'jobs/s', 'higher', (s) =>
        processRun(s, { jobs: JOBS, concurrency, processes }), { concurrency, processes });
    }
  }
}
if (SCENARIOS.includes('latency')) {
  add('latency', `latency p50 (1 job / 20 ms)`, 'ms', 'lower', (s) => latencyRun(s, LATENCY_JOBS), { percentiles: true });
}
if (SCENARIOS.includes('queues')) {
  const queues = Array.from({ length: 10 }, (_, i) => `bench${i}`);
  add('queues', `process ${JOBS}, 10 queues, c50, 1p`, 'jobs/s', 'higher', (s) =>
    processRun(s, { jobs: JOBS, concurrency: 50, processes: 1, queues }), { concurrency: 50, processes: 1 });
}
if (SCENARIOS.includes('bloat')) {
  add('bloat', `process ${JOBS}, c10, 1p, ${BLOAT_ROWS} finished rows`, 'jobs/s', 'higher', (s) =>
    systems[s].insertFinished ? processRun(s, { jobs: JOBS, concurrency: 10, processes: 1, bloat: BLOAT_ROWS }) : null,
    { concurrency: 10, processes: 1 });
}

if (SCENARIOS.includes('unlogged')) {
  // Stampeded only: the schema's per-queue durability switch, with the
  // counters unlogged too (the schema's notes: unlogging the jobs alone buys nothing).
  for (const [label, unlogged] of [['logged queue', false], ['UNLOGGED queue + counters', true]]) {
    add('unlogged', `process ${JOBS}, c10, 1p, ${label}`, 'jobs/s', 'higher', (s) =>
      systems[s].supportsUnlogged ? processRun(s, { jobs: JOBS, concurrency: 10, processes: 1, unlogged }) : null,
      { concurrency: 10, processes: 1 });
  }
}

// ---------------------------------------------------------------- main

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

server = await startPostgres();
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
  let s = `${Math.round(out.value).toLocaleString('en-US')} ${step.unit}`;
  if (out.rssPeakMb) s += `, peak RSS ${out.rssPeakMb.toFixed(0)} MB`;
  if (out.cpu) s += `, CPU per job: database ${out.cpu.dbUsPerJob?.toFixed(0) ?? '?'} us, workers ${out.cpu.workerUsPerJob.toFixed(0)} us`;
  if (out.timedOut) s += ` (stopped after ${MAX_SECONDS} s with ${out.done} done)`;
  return s;
}

function summarise(row) {
  for (const entry of Object.values(row.systems)) {
    const ok = entry.runs.filter((r) => !r.error);
    if (!ok.length) continue;
    for (const key of ['value', 'p50', 'p95', 'p99', 'rssPeakMb', 'rssMb']) {
      const xs = ok.map((r) => r[key]).filter((x) => typeof x === 'number');
      if (xs.length) entry[key] = { median: median(xs), min: Math.min(...xs), max: Math.max(...xs) };
    }
    entry.timedOut = ok.some((r) => r.timedOut);
  }
  const peers = Object.entries(row.systems).filter(([k, e]) => k !== 'stampeded' && e.value);
  const mine = row.systems.stampeded?.value?.median;
  if (mine !== undefined && peers.length) {
    const best = peers.reduce((a, b) => (row.better === 'higher' ? (b[1].value.median > a[1].value.median ? b : a) : (b[1].value.median < a[1].value.median ? b : a)));
    row.fastestPeer = best[0];
    row.ratio = row.better === 'higher' ? mine / best[1].value.median : best[1].value.median / mine;
  }
}

// ---------------------------------------------------------------- output

const fmt = (x, unit) => (x === undefined ? '-' : unit === 'ms' ? x.toFixed(1) : Math.round(x).toLocaleString('en-US'));
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
  for (const row of results) {
    if (row.scenario === 'latency') {
      for (const p of ['p50', 'p95', 'p99']) {
        let ratio = '-';
        const mine = row.systems.stampeded?.[p]?.median;
        const peers = Object.entries(row.systems).filter(([k, e]) => k !== 'stampeded' && e[p]).map(([, e]) => e[p].median);
        if (mine !== undefined && peers.length) ratio = `${(Math.min(...peers) / mine).toFixed(2)}x`;
        lines.push(`| latency ${p} (ms) | ${SYSTEMS.map((s) => cell(row.systems[s], p, 'ms')).join(' | ')} | ${ratio} |`);
      }
      continue;
    }
    lines.push(`| ${row.label} (${row.unit}) | ${SYSTEMS.map((s) => cell(row.systems[s], 'value', row.unit)).join(' | ')} | ${row.ratio ? `${row.ratio.toFixed(2)}x vs ${row.fastestPeer}` : '-'} |`);
    if (row.label.includes('c50, 1p') && row.scenario === 'process') {
      lines.push(`| worker peak RSS at c50 (MB) | ${SYSTEMS.map((s) => cell(row.systems[s], 'rssPeakMb', 'MB')).join(' | ')} | |`);
    }
  }
  return lines.join('\n');
}

const table = renderTable(results, SYSTEMS);
process.stdout.write(`\nmedian (min-max) of ${RUNS} run(s); ratio > 1 means Stampeded is ahead; * = stopped after ${MAX_SECONDS} s, rate of what finished\n\n${table}\n\n`);

const report = {
  at: new Date().toISOString(),
  quick,
  runs: RUNS,
  jobs: { process: JOBS, bulk: JOBS, single: SINGLE_JOBS, latency: LATENCY_JOBS, bloatRows: BLOAT_ROWS },
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
