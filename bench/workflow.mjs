// A 10,000-job fan-out/fan-in workflow, as a Nest app runs it: one root job,
// N jobs that wait for it, and one sink that waits for all N. Prints how
// long enqueueWorkflow() took and how many statements it sent, how long the
// whole workflow took from enqueue to the sink's completion, and the same N
// jobs enqueued plain (enqueueMany) and drained, for comparison; and, from
// pg_stat_statements, how many times stampeded_workflow_advance ran (one per
// completed batch holding workflow jobs, not one per edge) and what it cost.
//
//   node bench/workflow.mjs                 10,000 jobs, concurrency 50
//   node bench/workflow.mjs --jobs 2000 --concurrency 20
import 'reflect-metadata';
import pg from 'pg';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { StampededModule, QueueService, Task, migrate } from '@stampeded/nestjs';
import { startPostgres, createTestDatabase } from '@stampeded/testing';
import { option } from './args.mjs';

const N = Number(option('jobs', 10_000));
const CONCURRENCY = Number(option('concurrency', 50));

const server = await startPostgres({
  settings: { shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track': 'all' },
});
const db = await createTestDatabase(server.url, 'workflow_bench');
const client = new pg.Client({ connectionString: db.url });
await client.connect();
const q = (text, params) => client.query(text, params);

let finish;
let sinkDone = new Promise((resolve) => (finish = resolve));
class Noop {
  handle() {}
}
Task('noop', { queue: 'wf' })(Noop);
class Sink {
  handle() {
    finish(performance.now());
  }
}
Task('sink', { queue: 'wf' })(Sink);

let app;
try {
  await migrate(db.url);
  await q(`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`);
  class BenchModule {}
  Module({
    imports: [
      StampededModule.forRoot({ connection: { url: db.url }, worker: { concurrency: CONCURRENCY }, maintenance: { enabled: false } }),
      StampededModule.registerQueue({ name: 'wf' }),
    ],
    providers: [Noop, Sink],
  })(BenchModule);
  app = await NestFactory.createApplicationContext(BenchModule, { logger: ['error', 'warn'] });
  const queue = app.get(QueueService);

  const drained = async () => {
    for (;;) {
      const { rows } = await q(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE state NOT IN ('completed', 'discarded', 'cancelled')`);
      if (rows[0].n === 0) return performance.now();
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  // Plain: N + 2 jobs, no dependencies, enqueued in one enqueueMany().
  const plain = Array.from({ length: N + 2 }, (_, i) => ({ task: 'noop', args: { i } }));
  let t0 = performance.now();
  await queue.enqueueMany(plain);
  const plainEnqueued = performance.now() - t0;
  const plainDrained = (await drained()) - t0;

  await q('SELECT pg_stat_statements_reset()');
  const jobs = [
    { name: 'root', task: 'noop' },
    ...Array.from({ length: N }, (_, i) => ({ name: `fan-${i}`, task: 'noop', args: { i }, dependsOn: ['root'] })),
    { name: 'sink', task: 'sink', dependsOn: Array.from({ length: N }, (_, i) => `fan-${i}`) },
  ];
  t0 = performance.now();
  const wf = await queue.enqueueWorkflow({ name: 'fan-out-fan-in', jobs });
  const wfEnqueued = performance.now() - t0;
  const sinkAt = (await sinkDone) - t0;
  const states = (await q(`SELECT state, count(*)::int AS n FROM stampeded_jobs WHERE workflow_id = $1 GROUP BY 1`, [wf.id])).rows;
  const stats = (
    await q(`SELECT calls::int, round(total_exec_time::numeric, 1)::float AS ms, rows::int, left(regexp_replace(query, '\\s+', ' ', 'g'), 60) AS query
               FROM pg_stat_statements
              WHERE query ILIKE '%FROM stampeded_workflow_edges e%' OR query ILIKE 'WITH moved AS%'
                 OR (query ILIKE '%FROM stampeded_jobs d%' AND query ILIKE '%FOR UPDATE%')
                 OR query ILIKE 'WITH removed AS%'
              ORDER BY total_exec_time DESC`)
  ).rows;

  console.log(`${N} jobs fanned out from one root and into one sink, ${N * 2} edges, concurrency ${CONCURRENCY}, one process`);
  console.log(`  enqueueWorkflow: ${wfEnqueued.toFixed(0)} ms (one statement)`);
  console.log(`  enqueue to the sink's run: ${sinkAt.toFixed(0)} ms`);
  console.log(`  the same ${N + 2} jobs without dependencies: enqueueMany ${plainEnqueued.toFixed(0)} ms, enqueue to drained ${plainDrained.toFixed(0)} ms`);
  console.log(`  workflow jobs by state: ${states.map((s) => `${s.state} ${s.n}`).join(', ')}`);
  console.log('  statements (pg_stat_statements: the completions, and the three of each advance):');
  console.log('     calls       ms     rows  query');
  for (const s of stats) console.log(`  ${String(s.calls).padStart(8)} ${String(s.ms).padStart(8)} ${String(s.rows).padStart(8)}  ${s.query}`);
} finally {
  await app?.close();
  await client.end();
  await db.drop?.();
  await server.stop?.();
}
