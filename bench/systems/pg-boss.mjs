import { createRequire } from 'node:module';
import PgBoss from 'pg-boss';

const require = createRequire(import.meta.url);
export const name = 'pg-boss';
export const version = require('pg-boss/package.json').version;

// pg-boss 10 runs one fetch loop per work() call and, after every fetch,
// waits out the rest of pollingIntervalSeconds (0.5 s at least) before the
// next: a loop's throughput is batchSize per half second. So its throughput
// setting is a large batchSize (the batch is completed in one statement), with
// two loops per queue so that one fetches while the other runs; the handler
// runs a batch `concurrency` jobs at a time.
export function settings({ concurrency, queues = 1 }) {
  const perQueue = Math.max(1, Math.round(concurrency / queues));
  return {
    workersPerQueue: 2,
    batchSize: Math.max(100, perQueue * 10),
    handlerConcurrency: perQueue,
    pollingIntervalSeconds: 0.5,
    max: 10,
  };
}

function boss(url, extra = {}) {
  return new PgBoss({ connectionString: url, max: 10, ...extra });
}

export async function install(url, queues = ['bench']) {
  const b = boss(url, { supervise: false, schedule: false });
  b.on('error', () => {});
  await b.start();
  for (const q of queues) await b.createQueue(q);
  await b.stop({ graceful: false, wait: true });
}

export async function createQueues() {}

export async function startWorker(url, { concurrency, queues, handle }) {
  const b = boss(url);
  b.on('error', (e) => console.error('pg-boss:', e.message));
  await b.start();
  const s = settings({ concurrency, queues: queues.length });
  for (const q of queues) {
    for (let i = 0; i < s.workersPerQueue; i++) {
      await b.work(q, { batchSize: s.batchSize, pollingIntervalSeconds: s.pollingIntervalSeconds }, async (jobs) => {
        for (let k = 0; k < jobs.length; k += s.handlerConcurrency) {
          await Promise.all(jobs.slice(k, k + s.handlerConcurrency).map(async (job) => handle?.(job.data)));
        }
      });
    }
  }
  return { stop: () => b.stop({ graceful: true, wait: true, timeout: 10_000 }) };
}

export async function openProducer(url) {
  const b = boss(url, { supervise: false, schedule: false });
  b.on('error', () => {});
  await b.start();
  return {
    enqueueOne: (data, q = 'bench') => b.send(q, data),
    enqueueMany: (datas, q = 'bench') => b.insert(datas.map((data) => ({ name: q, data }))),
    close: () => b.stop({ graceful: false, wait: true }),
  };
}

export const pendingSql = `SELECT count(*)::int AS n FROM pgboss.job WHERE state < 'completed'`;
export const anyPendingSql = `SELECT EXISTS (SELECT 1 FROM pgboss.job WHERE state < 'completed') AS any`;
export const completedSql = `SELECT count(*)::int AS n FROM pgboss.job WHERE state = 'completed'`;

export async function insertFinished(client, n) {
  await client.query(
    `INSERT INTO pgboss.job (name, data, state, completed_on)
     SELECT 'bench', jsonb_build_object('i', g), 'completed', now() - interval '10 minutes'
       FROM generate_series(1, $1) g`,
    [n],
  );
}
