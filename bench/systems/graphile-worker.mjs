import { createRequire } from 'node:module';
import { run, makeWorkerUtils } from 'graphile-worker';

const require = createRequire(import.meta.url);
export const name = 'graphile-worker';
export const version = require('graphile-worker/package.json').version;

// From graphile-worker's performance page: a local queue that locks a batch of
// jobs ahead and batched completion. Size 500 is its suggestion for very
// high throughput of very fast tasks.
export function settings({ concurrency }) {
  return {
    concurrency,
    localQueue: { size: 500 },
    completeJobBatchDelay: 0,
    failJobBatchDelay: 0,
    maxPoolSize: Math.max(10, concurrency + 2),
    pollInterval: 2000,
  };
}

export async function install(url) {
  const utils = await makeWorkerUtils({ connectionString: url });
  await utils.migrate();
  await utils.release();
}

export async function createQueues() {}

export async function startWorker(url, { concurrency, queues, handle }) {
  const s = settings({ concurrency });
  const taskList = {};
  // Queues map to task identifiers: graphile-worker's own "queue_name" is a
  // serial queue (one job at a time), not a partition of work.
  for (const q of queues) taskList[q] = async (payload) => handle?.(payload);
  const { Logger } = await import('graphile-worker');
  const runner = await run({
    connectionString: url,
    concurrency: s.concurrency,
    maxPoolSize: s.maxPoolSize,
    pollInterval: s.pollInterval,
    noHandleSignals: true,
    taskList,
    logger: new Logger(() => (level, message) => {
      if (level === 'error') console.error('graphile-worker:', message);
    }),
    preset: {
      worker: { localQueue: s.localQueue, completeJobBatchDelay: s.completeJobBatchDelay, failJobBatchDelay: s.failJobBatchDelay },
    },
  });
  return { stop: () => runner.stop() };
}

export async function openProducer(url) {
  const utils = await makeWorkerUtils({ connectionString: url });
  return {
    enqueueOne: (data, q = 'bench') => utils.addJob(q, data),
    enqueueMany: (datas, q = 'bench') => utils.addJobs(datas.map((payload) => ({ identifier: q, payload }))),
    close: () => utils.release(),
  };
}

// Finished jobs are deleted, so "pending" is every row.
export const pendingSql = `SELECT count(*)::int AS n FROM graphile_worker._private_jobs`;
export const anyPendingSql = `SELECT EXISTS (SELECT 1 FROM graphile_worker._private_jobs) AS any`;
export const completedSql = null;
/** graphile-worker deletes a job when it completes: there are no finished rows to bloat with. */
export const insertFinished = null;
/** The "removed" scenario: what graphile-worker always does with a completed job. */
export const removesCompleted = true;
