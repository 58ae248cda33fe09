// What an enqueue costs, through the public API with no worker: an app
// context whose pool has one connection enqueues jobs in batches with
// enqueueMany(), then one at a time with enqueue(), and prints per job the
// CPU this process spent (building, validating and serialising the rows)
// and the CPU its backends spent (parsing the batch and
// inserting it), beside the wall time. The two CPU times are what a change
// to the enqueue path moves; the wall time moves with whatever else the
// machine runs, so compare CPU, alternating builds.
//
//   node bench/enqueue-cost.mjs                 20,000 jobs in batches of 500, then 2,000 single
//   node bench/enqueue-cost.mjs --jobs 50000 --batch 1000 --single 5000 --rounds 3
//
// PostgreSQL: DATABASE_URL when set, otherwise one started for the run.
import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { StampededModule, QueueService, migrate } from '@stampeded/nestjs';
import { startPostgres, createTestDatabase } from '@stampeded/testing';
import { option } from './args.mjs';

const JOBS = Number(option('jobs', 20_000));
const BATCH = Number(option('batch', 500));
const SINGLE = Number(option('single', 2_000));
const ROUNDS = Number(option('rounds', 1));

const server = await startPostgres();
const db = await createTestDatabase(server.url, 'enqueue_cost');
await migrate(db.url);
const checker = new pg.Client({ connectionString: db.url });
await checker.connect();
await checker.query(`SELECT stampeded_create_queue('bench')`);

class BenchModule {}
Module({
  imports: [
    StampededModule.forRoot({
      connection: { url: db.url, max: 1 },
      worker: { enabled: false },
      maintenance: { enabled: false },
      schedules: { enabled: false },
      events: 'local',
    }),
  ],
})(BenchModule);
const app = await NestFactory.createApplicationContext(BenchModule, { logger: ['error', 'warn'] });
const queue = app.get(QueueService);

// The app's backends (its pool, and the connection warm-up may open beside
// it): their CPU from Linux /proc (the server runs on this machine).
await queue.counts('bench');
const { rows } = await checker.query(
  `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = 'stampeded'`,
);
const backendCpuMs = () => {
  let ms = 0;
  for (const { pid } of rows) {
    try {
      const rest = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      ms += (Number(rest[11]) + Number(rest[12])) * 10;
    } catch {
      // a backend that has exited since: its CPU is no longer counted on either side
    }
  }
  return ms;
};
const processCpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

async function measure(label, jobs, run) {
  const backend0 = backendCpuMs();
  const process0 = processCpuMs();
  const started = performance.now();
  await run();
  const wall = performance.now() - started;
  const us = (ms) => ((ms * 1000) / jobs).toFixed(1).padStart(7);
  console.log(
    `${label.padEnd(28)} process CPU ${us(processCpuMs() - process0)} us  backend CPU ${us(backendCpuMs() - backend0)} us  wall ${us(wall)} us a job`,
  );
}

try {
  for (let round = 1; round <= ROUNDS; round++) {
    await measure(`enqueueMany, batches of ${BATCH}`, JOBS, async () => {
      for (let i = 0; i < JOBS; i += BATCH) {
        await queue.enqueueMany(
          Array.from({ length: Math.min(BATCH, JOBS - i) }, (_, k) => ({ task: 'noop', args: { i: i + k }, options: { queue: 'bench' } })),
        );
      }
    });
    await measure('enqueue, one at a time', SINGLE, async () => {
      for (let i = 0; i < SINGLE; i++) await queue.enqueue('noop', { i }, { queue: 'bench' });
    });
  }
  const { rows: stored } = await checker.query(`SELECT count(*)::int AS n FROM stampeded_jobs`);
  if (stored[0].n !== ROUNDS * (JOBS + SINGLE)) throw new Error(`${stored[0].n} jobs stored, expected ${ROUNDS * (JOBS + SINGLE)}`);
} finally {
  await app.close();
  await checker.end();
  await db.drop();
  await server.stop();
}
