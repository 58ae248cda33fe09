// What a busy dashboard costs the primary, with and without `readConnection`.
// A primary and a streaming standby (the tests' own harness,
// test/support/standby.ts), 100,000 finished jobs, and a steady load: an app
// enqueueing jobs in batches of 4 every 20 ms (about 100 a second
// on two shared cores, where this process also serves the pages) and a
// worker running them. Three windows
// of the same length, under that load:
//
//   load alone                  the load, nothing else
//   dashboard on the primary    4 clients loading the queues page and the jobs list in turn
//   dashboard on the replica    the same, through a dashboard whose readConnection is the standby
//
// For each it prints the CPU seconds the primary's processes spent (from
// /proc: every process of its postmaster), the standby's, the pages served
// and their median and 95th percentile load time. Not a test:
// `npm run build && node bench/replica-reads.mjs [seconds per window]`.
import { readFile, readdir, writeFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import ts from 'typescript';
import pg from 'pg';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { QueueService, StampededModule, Task, migrate } from '@stampeded/nestjs';
import { StampededDashboardModule } from '@stampeded/dashboard';
import { createTestDatabase } from '@stampeded/testing';

const SECONDS = Number(process.argv[2] ?? 15);
const CLIENTS = 4;
const AUTH = `Basic ${Buffer.from('ops:bench').toString('base64')}`;

/** The tests' standby harness, compiled here beside this file (so that it finds pg): one home for how a standby is made. */
async function loadStandbyHarness() {
  const source = await readFile(new URL('../test/support/standby.ts', import.meta.url), 'utf8');
  const { outputText } = ts.transpileModule(source, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } });
  const file = new URL(`.standby-${process.pid}.mjs`, import.meta.url);
  await writeFile(file, outputText.replace(`'./postgres-major.mjs'`, `'../test/support/postgres-major.mjs'`));
  try {
    return await import(file.href);
  } finally {
    await rm(file, { force: true });
  }
}

/** CPU seconds (user + system) spent so far by a postmaster and every process it started, those that exited included. */
async function clusterCpuSeconds(postmasterPid) {
  let ticks = 0;
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat;
    try {
      stat = await readFile(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const pid = Number(entry);
    const ppid = Number(fields[1]);
    // A backend that exited has its time in its postmaster's cutime and cstime, once reaped.
    if (pid === postmasterPid) ticks += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
    else if (ppid === postmasterPid) ticks += Number(fields[11]) + Number(fields[12]);
  }
  return ticks / 100; // USER_HZ, 100 on Linux
}

function percentile(sorted, p) {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] : NaN;
}

const { startPrimary, startStandby } = await loadStandbyHarness();
const primary = await startPrimary();
const standby = await startStandby(primary);
// The standby's postmaster, from its data folder's postmaster.pid (its first line).
const standbyPid = Number((await readFile(join(standby.data, 'postmaster.pid'), 'utf8')).split('\n')[0]);
const db = await createTestDatabase(primary.url, 'replica_bench');
const apps = [];
let stopLoad = false;
try {
  await migrate(db.url);
  const sql = new pg.Client({ connectionString: db.url });
  await sql.connect();
  await sql.query(`SELECT stampeded_create_queue('bench')`);
  await sql.query(
    `INSERT INTO stampeded_jobs (queue, task, state, finished_at, scheduled_at, args)
     SELECT 'bench', 'bench-noop', 'completed', now() - make_interval(secs => g % 3600), now() - make_interval(secs => g % 3600), jsonb_build_object('n', g)
       FROM generate_series(1, 100000) g`,
  );
  await sql.query('ANALYZE');
  await sql.end();
  await standby.caughtUp();

  class BenchNoop {
    async handle() {}
  }
  Task('bench-noop', { queue: 'bench' })(BenchNoop);
  /** A Nest module class with these imports and providers (a decorator returns nothing to use). */
  const moduleOf = (metadata) => {
    const module = class BenchApp {};
    Module(metadata)(module);
    return module;
  };
  const boot = async (module, listen) => {
    const app = await NestFactory.create(module, { logger: ['error'] });
    apps.push(app);
    if (!listen) return app.init();
    await app.listen(0, '127.0.0.1');
    return app;
  };
  const quiet = { maintenance: { enabled: false }, schedules: { enabled: false } };
  const worker = await boot(
    moduleOf({ imports: [StampededModule.forRoot({ connection: { url: db.url }, worker: { concurrency: 10, queues: ['bench'] } })], providers: [BenchNoop] }),
    false,
  );
  const dashboard = (readConnection) =>
    moduleOf({
      imports: [
        StampededModule.forRoot({ connection: { url: db.url }, worker: { enabled: false }, ...quiet, ...(readConnection ? { readConnection } : {}) }),
        StampededDashboardModule.forRoot({ auth: { username: 'ops', password: 'bench' }, refreshSeconds: 0 }),
      ],
    });
  const onPrimary = await boot(dashboard(undefined), true);
  const onReplica = await boot(dashboard({ url: standby.at(db.name) }), true);

  // The steady load: about 200 enqueues a second, run by the worker.
  const queue = worker.get(QueueService);
  let enqueued = 0;
  const loadStarted = Date.now();
  const load = (async () => {
    while (!stopLoad) {
      await queue.enqueueMany(Array.from({ length: 4 }, (_, i) => ({ task: 'bench-noop', args: { i } })));
      enqueued += 4;
      await new Promise((r) => setTimeout(r, 20));
    }
  })();

  const window = async (name, app) => {
    const base = app ? (await app.getUrl()).replace('[::1]', '127.0.0.1') : undefined;
    const [primaryBefore, standbyBefore] = await Promise.all([clusterCpuSeconds(primary.pid), clusterCpuSeconds(standbyPid)]);
    const times = [];
    const until = Date.now() + SECONDS * 1000;
    if (base) {
      await Promise.all(
        Array.from({ length: CLIENTS }, async (_, c) => {
          for (let i = c; Date.now() < until; i++) {
            const started = performance.now();
            const response = await fetch(`${base}/stampeded${i % 2 ? '/jobs?queue=bench' : ''}`, { headers: { authorization: AUTH } });
            await response.text();
            if (!response.ok) throw new Error(`${name}: ${response.status}`);
            times.push(performance.now() - started);
          }
        }),
      );
    } else {
      await new Promise((r) => setTimeout(r, SECONDS * 1000));
    }
    const [primaryAfter, standbyAfter] = await Promise.all([clusterCpuSeconds(primary.pid), clusterCpuSeconds(standbyPid)]);
    times.sort((a, b) => a - b);
    return {
      window: name,
      'primary CPU s': (primaryAfter - primaryBefore).toFixed(1),
      'standby CPU s': (standbyAfter - standbyBefore).toFixed(1),
      pages: times.length,
      'median ms': percentile(times, 50).toFixed(1),
      'p95 ms': percentile(times, 95).toFixed(1),
    };
  };

  // A warm-up of each, so that neither window pays for first connections and plans.
  await window('warm-up', onPrimary);
  await window('warm-up', onReplica);
  const rows = [await window('load alone'), await window('dashboard on the primary', onPrimary), await window('dashboard on the replica', onReplica)];
  const rate = Math.round(enqueued / ((Date.now() - loadStarted) / 1000));
  console.log(`${SECONDS} s per window, ${CLIENTS} page-loading clients, ${rate} enqueues/s run by a worker of concurrency 10`);
  console.table(rows);
  stopLoad = true;
  await load;
} finally {
  stopLoad = true;
  for (const app of apps.reverse()) await app.close().catch(() => {});
  await db.drop().catch(() => {});
  await standby.stop();
  await primary.stop();
}
