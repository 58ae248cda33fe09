// Chunked tasks (docs/tasks.md, "Chunks"): worker processes drain a queue
// whose handler writes one row per job into a table of the app's, and the run
// prints jobs a second and the CPU the database and the workers spent.
//
//   per-job  handle(args): one INSERT of one row per job, one call per job
//   chunk    handleChunk(jobs): one INSERT of the chunk's rows per call,
//            chunk: { size: --size }
//
//   node bench/chunk.mjs [--jobs 100000] [--size 100] [--workers 2] [--concurrency 10] [--scenarios per-job,chunk]
//
// PostgreSQL: DATABASE_URL when set, otherwise one started for the run. Each
// scenario runs on a fresh database; the jobs are inserted by SQL, in one
// statement, once the workers are up, and the clock runs from its commit to
// the last job's completion, read from the queue's counters every 50 ms. The
// database's CPU is its postmaster's and every backend's (Linux /proc, when
// the server runs on this machine), the workers' is each process's own.
import 'reflect-metadata';
import { fork } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { args, option } from './args.mjs';

if (args[0] === '--worker') {
  // A worker process: a Nest app context with the scenario's task on queue 'bench', and a pool of the app's own for its rows.
  const [, url, concurrency, scenario, size] = args;
  const { Module } = await import('@nestjs/common');
  const { NestFactory } = await import('@nestjs/core');
  const { StampededModule, Task } = await import('@stampeded/nestjs');
  const pool = new pg.Pool({ connectionString: url, max: Number(concurrency) });
  class SyncOne {
    async handle(args, ctx) {
      await pool.query(`INSERT INTO synced_rows (job_id, n) VALUES ($1, $2)`, [ctx.id, args.n]);
    }
  }
  class SyncChunk {
    async handleChunk(jobs) {
      await pool.query(`INSERT INTO synced_rows (job_id, n) SELECT * FROM unnest($1::uuid[], $2::int[])`, [jobs.map((j) => j.id), jobs.map((j) => j.args.n)]);
    }
  }
  const task = scenario === 'chunk' ? SyncChunk : SyncOne;
  Task('sync', { queue: 'bench', ...(scenario === 'chunk' ? { chunk: { size: Number(size) } } : {}) })(task);
  class BenchModule {}
  Module({
    imports: [StampededModule.forRoot({ connection: { url }, worker: { concurrency: Number(concurrency) }, maintenance: { enabled: false } })],
    providers: [task],
  })(BenchModule);
  const app = await NestFactory.createApplicationContext(BenchModule, { logger: ['error', 'warn'] });
  const cpuStart = process.cpuUsage();
  process.on('SIGTERM', async () => {
    const cpu = process.cpuUsage(cpuStart);
    await app.close();
    await pool.end();
    process.send({ cpuMs: (cpu.user + cpu.system) / 1000 }, () => process.exit(0));
  });
  process.send({ ready: true });
} else {
  const JOBS = Number(option('jobs', 100_000));
  const SIZE = Number(option('size', 100));
  const WORKERS = Number(option('workers', 2));
  const CONCURRENCY = Number(option('concurrency', 10));
  const SCENARIOS = option('scenarios', 'per-job,chunk').split(',');
  const { startPostgres, createTestDatabase } = await import('@stampeded/testing');
  const { migrate } = await import('@stampeded/nestjs');
  const server = await startPostgres();

  /** The postmaster's pid, to read the server's CPU from /proc; undefined when it runs elsewhere. */
  const postmaster = async (client) => {
    try {
      const { rows } = await client.query(`SELECT current_setting('data_directory') AS dir`);
      return Number(readFileSync(`${rows[0].dir}/postmaster.pid`, 'utf8').split('\n')[0]);
    } catch {
      return undefined;
    }
  };
  /** CPU ms spent so far by the server: the postmaster, its reaped children, and its live ones (Linux /proc). */
  const serverCpuMs = (pid) => {
    if (!pid) return NaN;
    const tick = 1000 / 100; // USER_HZ
    const stat = (p) => {
      try {
        const text = readFileSync(`/proc/${p}/stat`, 'utf8');
        return text.slice(text.lastIndexOf(')') + 2).split(' ');
      } catch {
        return null;
      }
    };
    const own = stat(pid);
    if (!own) return NaN;
    let total = (Number(own[11]) + Number(own[12]) + Number(own[13]) + Number(own[14])) * tick;
    for (const p of readdirSync('/proc')) {
      if (!/^\d+$/.test(p)) continue;
      const fields = stat(p);
      if (fields && Number(fields[1]) === pid) total += (Number(fields[11]) + Number(fields[12])) * tick;
    }
    return total;
  };

  const load = loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  console.log(`${JOBS} jobs, ${WORKERS} worker processes at concurrency ${CONCURRENCY}, chunks of ${SIZE}; load average ${load}`);
  try {
    for (const scenario of SCENARIOS) {
      if (scenario !== 'per-job' && scenario !== 'chunk') throw new Error(`unknown scenario ${scenario}; pick from per-job, chunk`);
      const db = await createTestDatabase(server.url, `chunk_${scenario.replace(/\W/g, '_')}`);
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      const workers = [];
      const cpuReports = [];
      try {
        await migrate(db.url);
        await client.query(`SELECT stampeded_create_queue('bench')`);
        await client.query(`CREATE TABLE synced_rows (job_id uuid PRIMARY KEY, n int NOT NULL, synced_at timestamptz NOT NULL DEFAULT now())`);
        for (let i = 0; i < WORKERS; i++) {
          const child = fork(fileURLToPath(import.meta.url), ['--worker', db.url, String(CONCURRENCY), scenario, String(SIZE)], { stdio: 'inherit' });
          child.on('message', (m) => m.cpuMs !== undefined && cpuReports.push(m.cpuMs));
          workers.push(child);
        }
        await Promise.all(workers.map((w) => new Promise((resolve) => w.once('message', resolve))));
        // Once every worker is up, so that none has a head start: the jobs are claimable from the insert's commit.
        await client.query(`INSERT INTO stampeded_jobs (queue, task, args) SELECT 'bench', 'sync', jsonb_build_object('n', g) FROM generate_series(1, $1) g`, [
          JOBS,
        ]);
        const pid = await postmaster(client);
        const cpu0 = serverCpuMs(pid);
        const started = performance.now();
        for (;;) {
          const { rows } = await client.query(`SELECT coalesce(sum(n), 0)::int AS n FROM stampeded_queue_counts WHERE queue = 'bench' AND state = 'completed'`);
          if (rows[0].n >= JOBS) break;
          await new Promise((r) => setTimeout(r, 50));
        }
        const seconds = (performance.now() - started) / 1000;
        const dbCpuMs = serverCpuMs(pid) - cpu0;
        await Promise.all(workers.map((w) => new Promise((resolve) => (w.exitCode !== null ? resolve() : (w.once('exit', resolve), w.kill('SIGTERM'))))));
        const { rows: written } = await client.query(`SELECT count(*)::int AS n FROM synced_rows`);
        if (written[0].n !== JOBS) throw new Error(`${scenario}: ${written[0].n} rows written for ${JOBS} jobs`);
        const workerCpuMs = cpuReports.reduce((a, b) => a + b, 0);
        const perJob = (ms) => (Number.isNaN(ms) ? 'n/a' : `${((ms * 1000) / JOBS).toFixed(0)} us`);
        console.log(
          `  ${scenario.padEnd(8)} ${JOBS} jobs in ${seconds.toFixed(2)} s: ${Math.round(JOBS / seconds)} jobs/s; ` +
            `database CPU ${(dbCpuMs / 1000).toFixed(1)} s (${perJob(dbCpuMs)} a job), workers' CPU ${(workerCpuMs / 1000).toFixed(1)} s (${perJob(workerCpuMs)} a job)`,
        );
      } finally {
        await Promise.all(workers.map((w) => new Promise((resolve) => (w.exitCode !== null ? resolve() : (w.once('exit', resolve), w.kill('SIGTERM'))))));
        await client.end();
        await db.drop();
      }
    }
  } finally {
    await server.stop();
  }
}
