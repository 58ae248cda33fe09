// npm run soak -- a steady load for SOAK_SECONDS (default 600) with every
// feature on: retries (a fifth of the jobs fail once), an every-second
// schedule, dedup on a tenth of the enqueues, per-tenant fairness across ten
// tenants, a destination per job, the maintenance leader pruning completed
// jobs after a minute. Every SOAK_SAMPLE_SECONDS it prints the process's
// memory, the claim latency (enqueue to start) and the jobs table's size and
// rows; at the end it draws them to .test-results/soak.svg and writes the
// samples to .test-results/soak.json. Flat lines are the pass mark; it does
// not assert, it shows (bench/ style: numbers, not timed assertions).
import 'reflect-metadata';
import { mkdirSync, writeFileSync } from 'node:fs';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import { JobEvents, QueueService, StampededModule, Task, migrate } from '@stampeded/nestjs';
import { createTestDatabase, startPostgres } from '@stampeded/testing';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 600);
const SAMPLE_SECONDS = Number(process.env.SOAK_SAMPLE_SECONDS ?? (SECONDS >= 120 ? 15 : 5));
const RATE = Number(process.env.SOAK_RATE ?? 100); // jobs per second

const server = await startPostgres({ ignoreDatabaseUrl: !process.env.DATABASE_URL });
const database = process.env.DATABASE_URL ? { url: server.url, drop: async () => {} } : await createTestDatabase(server.url, 'stampeded_soak');
await migrate(database.url);

const failedOnce = new Set();
class SoakWork {
  async handle(args) {
    await new Promise((r) => setTimeout(r, args.ms));
    if (args.flaky && !failedOnce.has(args.n)) {
      failedOnce.add(args.n);
      throw new Error(`flaky job ${args.n} fails its first attempt`);
    }
    failedOnce.delete(args.n);
  }
}
Task('soak-work', { queue: 'soak', maxAttempts: 5, backoff: { baseMs: 200, maxMs: 2000 } })(SoakWork);
class SoakTick {
  handle() {}
}
Task('soak-tick', { queue: 'soak-ticks', schedule: { every: '1s' } })(SoakTick);

class SoakModule {}
Module({
  imports: [
    StampededModule.forRoot({
      connection: { url: database.url },
      worker: { concurrency: 20 },
      maintenance: { completedRetention: '1m', pruneIntervalMs: 10_000, reapIntervalMs: 5000, expireIntervalMs: 5000 },
      control: { fairness: process.env.SOAK_FAIRNESS !== '0' },
    }),
  ],
  providers: [SoakWork, SoakTick],
})(SoakModule);

const app = await NestFactory.createApplicationContext(SoakModule, { logger: ['error', 'warn'] });
const queue = app.get(QueueService);
const sql = new pg.Pool({ connectionString: database.url, max: 2 });

let latencies = [];
let completed = 0;
app.get(JobEvents).events$.subscribe((e) => {
  if (e.type === 'active' && e.job.queue === 'soak') latencies.push(Date.now() - new Date(e.job.scheduledAt).getTime());
  if (e.type === 'completed') completed++;
});

const samples = [];
const started = Date.now();
let n = 0;
const enqueueTimer = setInterval(() => {
  const batch = Array.from({ length: Math.round(RATE / 10) }, () => {
    n++;
    return {
      task: 'soak-work',
      args: { n, ms: 5 + (n % 20), flaky: n % 5 === 0 },
      options: {
        tenantId: `tenant-${n % 10}`,
        // The flaky fifth fails on its own account and carries no destination:
        // a destination failing a fifth of its calls is, by the breaker's
        // measure (5 failures a minute), down, and its breaker would hold
        // every job of it -- a different soak from the one this is.
        ...(n % 5 === 0 ? {} : { destination: `dest-${n % 3}` }),
        ...(n % 10 === 0 ? { dedup: { scope: `soak-${Math.floor(n / 20)}` } } : {}),
      },
    };
  });
  queue.enqueueMany(batch).catch((err) => console.error(`enqueue failed: ${err.message}`));
}, 100);

function percentile(values, p) {
  if (!values.length) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function sample() {
  const { rows } = await sql.query(
    `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint AS bytes,
            (SELECT count(*) FROM stampeded_jobs)::int AS rows
       FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = 'stampeded_jobs'::regclass`,
  );
  const memory = process.memoryUsage();
  const s = {
    t: Math.round((Date.now() - started) / 1000),
    rssMb: +(memory.rss / 1048576).toFixed(1),
    heapMb: +(memory.heapUsed / 1048576).toFixed(1),
    claimP50Ms: percentile(latencies, 50),
    claimP99Ms: percentile(latencies, 99),
    tableMb: +(Number(rows[0].bytes) / 1048576).toFixed(2),
    rows: rows[0].rows,
    completed,
  };
  latencies = [];
  samples.push(s);
  console.log(
    `t=${String(s.t).padStart(4)}s rss ${s.rssMb} MB heap ${s.heapMb} MB claim p50 ${s.claimP50Ms} ms p99 ${s.claimP99Ms} ms ` +
      `table ${s.tableMb} MB ${s.rows} rows, ${s.completed} completed`,
  );
}

console.log(`soak: ${SECONDS} s at ${RATE} jobs/s, sampling every ${SAMPLE_SECONDS} s`);
await new Promise((resolve) => {
  const timer = setInterval(() => {
    void sample().then(() => {
      if (Date.now() - started >= SECONDS * 1000) {
        clearInterval(timer);
        resolve();
      }
    });
  }, SAMPLE_SECONDS * 1000);
});
clearInterval(enqueueTimer);
// Why jobs waited: deferrals and failures by kind, over every job still in the table.
const kinds = await sql.query(
  `SELECT coalesce(failure_kind, '-') AS kind, state, count(*)::int AS jobs, sum(deferrals)::int AS deferrals
     FROM stampeded_jobs WHERE queue = 'soak' GROUP BY 1, 2 ORDER BY 3 DESC`,
);
for (const k of kinds.rows) console.log(`jobs by failure kind: ${k.kind} ${k.state} ${k.jobs} (deferrals ${k.deferrals})`);
await app.close();
await sql.end();
await database.drop();
await server.stop();

mkdirSync('.test-results', { recursive: true });
writeFileSync('.test-results/soak.json', JSON.stringify(samples, null, 2));
writeFileSync('.test-results/soak.svg', chart(samples));
console.log('wrote .test-results/soak.svg and .test-results/soak.json');

/** Three small line charts, one per measure, drawn by hand: no dependency for a picture. */
function chart(points) {
  const panels = [
    {
      title: 'memory (MB): rss, heap',
      series: [
        ['rssMb', '#1f77b4'],
        ['heapMb', '#aec7e8'],
      ],
    },
    {
      title: 'claim latency (ms): p50, p99',
      series: [
        ['claimP50Ms', '#2ca02c'],
        ['claimP99Ms', '#98df8a'],
      ],
    },
    { title: 'jobs table (MB)', series: [['tableMb', '#d62728']] },
  ];
  const width = 720;
  const height = 180;
  const pad = 40;
  const maxT = Math.max(1, ...points.map((p) => p.t));
  const parts = panels.map((panel, i) => {
    const top = i * (height + 20);
    const maxY = Math.max(1, ...panel.series.flatMap(([key]) => points.map((p) => p[key]))) * 1.1;
    const x = (t) => pad + ((width - 2 * pad) * t) / maxT;
    const y = (v) => top + height - pad / 2 - ((height - pad) * v) / maxY;
    const lines = panel.series
      .map(
        ([key, color]) =>
          `<polyline fill="none" stroke="${color}" stroke-width="2" points="${points.map((p) => `${x(p.t).toFixed(1)},${y(p[key]).toFixed(1)}`).join(' ')}"/>`,
      )
      .join('');
    return (
      `<text x="${pad}" y="${top + 14}" font-size="13" font-family="sans-serif">${panel.title}</text>` +
      `<line x1="${pad}" y1="${y(0)}" x2="${width - pad}" y2="${y(0)}" stroke="#999"/>` +
      `<line x1="${pad}" y1="${top + 20}" x2="${pad}" y2="${y(0)}" stroke="#999"/>` +
      `<text x="4" y="${top + 30}" font-size="11" font-family="sans-serif">${(maxY / 1.1).toFixed(1)}</text>` +
      `<text x="${width - pad}" y="${y(0) + 14}" font-size="11" font-family="sans-serif" text-anchor="end">${maxT} s</text>` +
      lines
    );
  });
  const total = panels.length * (height + 20);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${total}" viewBox="0 0 ${width} ${total}"><rect width="100%" height="100%" fill="white"/>${parts.join('')}</svg>\n`;
}
