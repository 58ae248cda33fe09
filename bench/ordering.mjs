// Per-key ordering's throughput (docs/ordering.md): worker processes drain a
// queue of no-op jobs, and the run prints jobs a second per scenario.
//
//   plain      jobs without a key: the baseline
//   keys       the same jobs spread over 1,000 keys (enqueued interleaved,
//              as traffic arrives): each key one at a time, the keys in parallel
//   hot        every job of one key: one at a time, whatever the fleet
//   hot+plain  one hot key's jobs ahead of plain jobs in the claim order:
//              what a blocked line costs the claims of everything else
//              (the plain jobs' own rate is printed too: the whole run
//              lasts at least as long as the hot key's line)
//
//   node bench/ordering.mjs [--jobs 20000] [--hot 2000] [--workers 2] [--concurrency 20] [--scenarios plain,keys,hot,hot+plain]
//
// PostgreSQL: DATABASE_URL when set, otherwise one started for the run. Each
// scenario runs on a fresh database; the jobs are inserted by SQL before the
// workers start, and the clock runs from the workers' start to the last
// job's completion, read from the queue's counters every 50 ms.
import 'reflect-metadata';
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { args, option } from './args.mjs';

if (args[0] === '--worker') {
  // A worker process: a Nest app context with one no-op task on queue 'bench'.
  const [, url, concurrency] = args;
  const { Module } = await import('@nestjs/common');
  const { NestFactory } = await import('@nestjs/core');
  const { StampededModule, Task } = await import('@stampeded/nestjs');
  class Noop {
    handle() {}
  }
  Task('noop', { queue: 'bench' })(Noop);
  class BenchModule {}
  Module({
    imports: [StampededModule.forRoot({ connection: { url }, worker: { concurrency: Number(concurrency) }, maintenance: { enabled: false } })],
    providers: [Noop],
  })(BenchModule);
  const app = await NestFactory.createApplicationContext(BenchModule, { logger: ['error', 'warn'] });
  process.on('SIGTERM', async () => {
    await app.close();
    process.exit(0);
  });
  process.send({ ready: true });
} else {
  const JOBS = Number(option('jobs', 20_000));
  const HOT = Number(option('hot', 2_000));
  const WORKERS = Number(option('workers', 2));
  const CONCURRENCY = Number(option('concurrency', 20));
  const SCENARIOS = option('scenarios', 'plain,keys,hot,hot+plain').split(',');
  const { startPostgres, createTestDatabase } = await import('@stampeded/testing');
  const { migrate } = await import('@stampeded/nestjs');
  const server = await startPostgres();

  // The jobs of a scenario, as (ordering key or NULL) per job in enqueue order; ids drawn in that order.
  const layouts = {
    plain: { jobs: JOBS, key: `NULL` },
    keys: { jobs: JOBS, key: `'key-' || (g % 1000)` },
    hot: { jobs: HOT, key: `'hot'` },
    'hot+plain': { jobs: JOBS, key: `CASE WHEN g <= ${HOT} THEN 'hot' END` },
  };

  console.log(`${WORKERS} worker processes at concurrency ${CONCURRENCY}, no-op jobs`);
  try {
    for (const scenario of SCENARIOS) {
      const layout = layouts[scenario];
      if (!layout) throw new Error(`unknown scenario ${scenario}; pick from ${Object.keys(layouts).join(', ')}`);
      const db = await createTestDatabase(server.url, `ordering_${scenario.replace(/\W/g, '_')}`);
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      const workers = [];
      try {
        await migrate(db.url);
        await client.query(`SELECT stampeded_create_queue('bench')`);
        // In enqueue order, so that ids (the column's default, UUIDv7) increase with g; each keyed
        // job's place is then its id, as the enqueue sets it.
        await client.query(
          `INSERT INTO stampeded_jobs (queue, task, ordering_key, ordering_position)
                SELECT 'bench', 'noop', k, CASE WHEN k IS NOT NULL THEN '00000000-0000-0000-0000-000000000000'::uuid END
                  FROM (SELECT g, ${layout.key} AS k FROM generate_series(1, $1) g) s ORDER BY g`,
          [layout.jobs],
        );
        await client.query(`UPDATE stampeded_jobs SET ordering_position = id WHERE ordering_key IS NOT NULL`);
        // As the enqueue leaves them where keyed jobs wait for their turn (migration 14): a key's
        // first job available, the others 'pending', outside the claim index.
        const { rows: lines } = await client.query(`SELECT to_regclass('stampeded_jobs_ordering_waiting_idx') IS NOT NULL AS waiting`);
        if (lines[0].waiting) {
          await client.query(
            `UPDATE stampeded_jobs j SET state = 'pending'
               FROM (SELECT id, row_number() OVER (PARTITION BY ordering_key ORDER BY ordering_position) AS nth
                       FROM stampeded_jobs WHERE queue = 'bench' AND ordering_key IS NOT NULL) l
              WHERE j.queue = 'bench' AND j.id = l.id AND l.nth > 1`,
          );
        }
        await client.query('VACUUM ANALYZE');
        for (let i = 0; i < WORKERS; i++) {
          const child = fork(fileURLToPath(import.meta.url), ['--worker', db.url, String(CONCURRENCY)], { stdio: 'inherit' });
          workers.push(child);
        }
        await Promise.all(workers.map((w) => new Promise((resolve) => w.once('message', resolve))));
        const started = performance.now();
        // With a hot key beside plain work, also when the plain jobs were all done: the hot key's
        // own line takes as long as its jobs one after the other, whatever the claims cost, so the
        // whole run's rate says little about what the blocked jobs cost the other work.
        const plainJobs = scenario === 'hot+plain' ? layout.jobs - HOT : 0;
        let plainSeconds;
        for (;;) {
          const { rows } = await client.query(`SELECT coalesce(sum(n), 0)::int AS n FROM stampeded_queue_counts WHERE queue = 'bench' AND state = 'completed'`);
          if (plainJobs && plainSeconds === undefined) {
            const { rows: plain } = await client.query(
              `SELECT count(*)::int AS n FROM stampeded_jobs WHERE queue = 'bench' AND state = 'completed' AND ordering_key IS NULL`,
            );
            if (plain[0].n >= plainJobs) plainSeconds = (performance.now() - started) / 1000;
          }
          if (rows[0].n >= layout.jobs) break;
          await new Promise((r) => setTimeout(r, 50));
        }
        const seconds = (performance.now() - started) / 1000;
        console.log(`  ${scenario.padEnd(10)} ${String(layout.jobs).padStart(6)} jobs in ${seconds.toFixed(2)} s: ${Math.round(layout.jobs / seconds)} jobs/s`);
        if (plainJobs) {
          console.log(
            `  ${''.padEnd(10)} ${String(plainJobs).padStart(6)} plain jobs in ${plainSeconds.toFixed(2)} s: ${Math.round(plainJobs / plainSeconds)} jobs/s`,
          );
        }
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
