// Stampeded, as a NestJS user runs it: a Nest application context with
// StampededModule, and a @Task provider (applied by plain call, this is .mjs).
import 'reflect-metadata';
import { createRequire } from 'node:module';
import pg from 'pg';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { StampededModule, QueueService, Task, migrate } from '@stampeded/nestjs';

const require = createRequire(import.meta.url);
export const name = 'stampeded';
export const version = require('../../libs/stampeded/package.json').version;

/** Stampeded's own defaults: nothing is tuned for the benchmark. */
export function settings({ concurrency }) {
  const s = {
    concurrency,
    prefetch: 'default (auto: ~200 ms of work at the rate slots free up, none below one per slot per 200 ms, up to 500)',
    claimBatchSize: 'default (500)',
    completionBatchSize: 'default (500)',
    poolSize: 'default (10)',
  };
  // An experiment's overrides are printed with the settings: numbers measured with them are not the defaults'.
  if (Object.keys(override).length) s.workerOverride = override;
  if (Object.keys(moduleOverride).length) s.moduleOverride = moduleOverride;
  if (listen) s.listening = 'a connection per worker process listens to the job events';
  return s;
}

export async function install(url) {
  await migrate(url);
}

/** The UNLOGGED scenario: a queue partition that a crash empties. */
export const supportsUnlogged = true;

/** The "removed" scenario: jobs enqueued with removeOnComplete. */
export const removesCompleted = true;

export async function createQueues(url, queues, { unlogged = false } = {}) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    // One partition per queue, as registerQueue() provisions it.
    for (const q of queues) await client.query('SELECT stampeded_create_queue($1, $2)', [q, unlogged]);
    // For experiments only: STAMPEDED_BENCH_FILLFACTOR=50 gives the queues' partitions that fillfactor.
    const fillfactor = Number(process.env.STAMPEDED_BENCH_FILLFACTOR ?? 0);
    if (fillfactor) {
      for (const q of queues) await client.query(`ALTER TABLE stampeded_jobs_${q.replace(/[^a-zA-Z0-9_]/g, '_')} SET (fillfactor = ${fillfactor})`);
    }
    // The schema's note: an unlogged queue is only fast with unlogged counters
    // (a derived cache, rebuilt by stampeded_recount_queue), a global choice.
    if (unlogged) await client.query('ALTER TABLE stampeded_queue_counts SET UNLOGGED');
  } finally {
    await client.end();
  }
}

async function boot(url, worker, handle) {
  class Noop {
    handle(args) {
      handle?.(args);
    }
  }
  Task('noop')(Noop);
  class BenchModule {}
  Module({
    imports: [StampededModule.forRoot({ connection: { url }, worker, ...moduleOverride })],
    providers: [Noop],
  })(BenchModule);
  return NestFactory.createApplicationContext(BenchModule, { logger: ['error', 'warn'] });
}

// For experiments only: STAMPEDED_BENCH_WORKER='{"prefetch":500}' overrides worker options,
// STAMPEDED_BENCH_MODULE='{"maintenance":{"enabled":false}}' other module options.
const override = JSON.parse(process.env.STAMPEDED_BENCH_WORKER ?? '{}');
const moduleOverride = JSON.parse(process.env.STAMPEDED_BENCH_MODULE ?? '{}');

// For experiments only: STAMPEDED_BENCH_LISTEN=1 gives each worker process a
// connection that listens to the job events, as an API process with
// @OnJobEvent does, so that the workers notify them (events: 'fleet').
const listen = process.env.STAMPEDED_BENCH_LISTEN === '1';

export async function startWorker(url, { concurrency, queues, handle }) {
  let listener;
  if (listen) {
    listener = new pg.Client({ connectionString: url });
    await listener.connect();
    listener.on('notification', () => {});
    await listener.query(`SELECT pg_advisory_lock_shared(hashtextextended('stampeded.events.public', 0))`);
    await listener.query(`LISTEN "public.stampeded_events"`);
  }
  const app = await boot(url, { concurrency, queues, ...override }, handle);
  return {
    stop: async () => {
      await app.close();
      await listener?.end();
    },
  };
}

export async function openProducer(url) {
  const app = await boot(url, { enabled: false });
  const queue = app.get(QueueService);
  return {
    enqueueOne: (data, q) => queue.enqueue('noop', data, q ? { queue: q } : undefined),
    enqueueMany: (datas, q, { remove = false } = {}) =>
      queue.enqueueMany(datas.map((args) => ({ task: 'noop', args, options: { ...(q ? { queue: q } : {}), ...(remove ? { removeOnComplete: true } : {}) } }))),
    close: () => app.close(),
  };
}

// Read only once the workers report every job handled (nothing is read
// while the jobs are processed, for any system): from the trigger-maintained
// counters, as a Stampeded user reads them (QueueService.counts), which the
// completions update in their own transactions. The run's end is still
// checked against the table (completedSql): counters that ran ahead or
// behind fail the run.
export const pendingSql = `SELECT coalesce(sum(n), 0)::int AS n FROM stampeded_queue_counts WHERE state IN ('available','retryable','claimed','executing')`;
export const anyPendingSql = `SELECT coalesce(sum(n), 0) > 0 AS any FROM stampeded_queue_counts WHERE state IN ('available','retryable','claimed','executing')`;
export const completedSql = `SELECT count(*)::int AS n FROM stampeded_jobs WHERE state = 'completed'`;

/** Finished jobs already in the table, as a long-running install has them. */
export async function insertFinished(client, n) {
  await client.query(
    `INSERT INTO stampeded_jobs (queue, task, state, attempt, finished_at, args)
     SELECT 'bench', 'noop', 'completed', 1, now() - interval '10 minutes', jsonb_build_object('i', g)
       FROM generate_series(1, $1) g`,
    [n],
  );
}
