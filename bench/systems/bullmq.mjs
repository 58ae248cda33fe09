import { createRequire } from 'node:module';
import { withBackend, createPostgresBackend } from 'bullmq';

const require = createRequire(import.meta.url);
export const name = 'bullmq';
export const version = require('bullmq/package.json').version;

// BullMQ 6's PostgreSQL backend (withBackend(createPostgresBackend)), what a
// @nestjs/bullmq user would switch to. Throughput settings from its docs:
// concurrency per Worker, and removeOnComplete so finished jobs do not pile up.
export function settings({ concurrency, queues = 1 }) {
  return {
    backend: 'withBackend(createPostgresBackend)',
    concurrencyPerWorker: Math.max(1, Math.round(concurrency / queues)),
    workersPerProcess: queues,
    removeOnComplete: { count: 1000 },
    removeOnFail: { count: 5000 },
  };
}

const { Queue, Worker } = withBackend(createPostgresBackend);
const conn = (url) => ({ connectionString: url, max: 10 });

export async function install(url) {
  const q = new Queue('bench', { connection: { ...conn(url), migrate: true } });
  await q.waitUntilReady();
  await q.close();
}

export async function createQueues() {}

const jobOpts = { removeOnComplete: { count: 1000 }, removeOnFail: { count: 5000 } };

export async function startWorker(url, { concurrency, queues, handle }) {
  const s = settings({ concurrency, queues: queues.length });
  const workers = queues.map((q) => new Worker(q, async (job) => handle?.(job.data), { connection: conn(url), concurrency: s.concurrencyPerWorker }));
  for (const w of workers) w.on('error', (e) => console.error('bullmq:', e.message));
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  return { stop: () => Promise.all(workers.map((w) => w.close())) };
}

export async function openProducer(url) {
  const queues = new Map();
  const queue = (q) => {
    if (!queues.has(q)) queues.set(q, new Queue(q, { connection: conn(url) }));
    return queues.get(q);
  };
  await queue('bench').waitUntilReady();
  return {
    enqueueOne: (data, q = 'bench') => queue(q).add('noop', data, jobOpts),
    enqueueMany: (datas, q = 'bench') => queue(q).addBulk(datas.map((data) => ({ name: 'noop', data, opts: jobOpts }))),
    close: () => Promise.all([...queues.values()].map((x) => x.close())),
  };
}

/** Asked through BullMQ's own API: its tables are its business. */
export async function openChecker(url, queues) {
  const qs = queues.map((q) => new Queue(q, { connection: conn(url) }));
  const pending = async () => {
    let n = 0;
    for (const queue of qs) {
      const c = await queue.getJobCounts('wait', 'active', 'prioritized', 'delayed', 'paused');
      n += c.wait + c.active + c.prioritized + c.delayed + c.paused;
    }
    return n;
  };
  return {
    anyPending: async () => (await pending()) > 0,
    pending,
    completed: async () => null,
    close: () => Promise.all(qs.map((q) => q.close())),
  };
}
export const insertFinished = null;
