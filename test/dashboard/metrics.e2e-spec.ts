import { Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Registry } from 'prom-client';
import { QueueService, StampededModule, Task, UnrecoverableError, type TaskHandler } from '@stampeded/nestjs';
import { StampededMetrics, StampededMetricsModule } from '@stampeded/dashboard';
import type { TestDatabase } from '@stampeded/testing';
import { sqlClient, testDatabase, waitFor } from '../support/test-app.js';
import { metricSample } from '../support/metrics.js';

@Task('resize', { queue: 'images', maxAttempts: 2, backoff: { baseMs: 10, maxMs: 10 } })
class Resize implements TaskHandler<{ fail?: 'once' | 'always' | 'unrecoverable' }> {
  async handle(args: { fail?: string }, ctx: { attempt: number }) {
    if (args.fail === 'unrecoverable') throw new UnrecoverableError('corrupt image');
    if (args.fail === 'always' || (args.fail === 'once' && ctx.attempt === 1)) throw new Error('decoder crashed');
  }
}

describe('Prometheus metrics', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let base: string;

  beforeAll(async () => {
    db = await testDatabase();
    @Module({
      imports: [
        StampededModule.forRoot({ connection: { url: db.url }, migrations: 'auto', worker: { pollIntervalMs: 100 } }),
        StampededMetricsModule.forRoot(),
      ],
      providers: [Resize],
    })
    class MetricsTestModule {}
    app = await NestFactory.create(MetricsTestModule, { logger: ['error'] });
    await app.listen(0, '127.0.0.1');
    base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('counts outcomes, failures by kind, durations and queue waits from real runs, and jobs per state from the counters', async () => {
    const queue = app.get(QueueService);
    await queue.enqueueMany([
      { task: 'resize', args: {} },
      { task: 'resize', args: {} },
      { task: 'resize', args: { fail: 'once' } },
      { task: 'resize', args: { fail: 'always' } },
      { task: 'resize', args: { fail: 'unrecoverable' } },
    ]);
    await queue.enqueue('thumbnail', {}, { queue: 'backlog' });
    const sql = await sqlClient(db.url);
    try {
      await waitFor(
        async () => (await sql.query(`SELECT 1 FROM stampeded_jobs WHERE queue = 'images' AND finished_at IS NOT NULL`)).rowCount === 5,
        'all five to finish',
      );
      await sql.query(`INSERT INTO stampeded_queue_policies (queue, verdict) VALUES ('backlog', 'hold'), ('images', 'steady')`);
      await sql.query(`UPDATE stampeded_queue_policies SET paused = true, paused_by = 'ops', paused_at = now() WHERE queue = 'backlog'`);
      await sql.query(`INSERT INTO stampeded_breakers (destination, state, opened_at, open_until) VALUES ('smtp', 'open', now(), now() + interval '1 minute')`);
    } finally {
      await sql.end();
    }
    const response = await fetch(`${base}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await response.text();
    const images = { queue: 'images', task: 'resize' };
    expect(metricSample(text, 'stampeded_job_outcomes_total', { ...images, outcome: 'completed' })).toBe(3);
    expect(metricSample(text, 'stampeded_job_outcomes_total', { ...images, outcome: 'retrying' })).toBe(2);
    expect(metricSample(text, 'stampeded_job_outcomes_total', { ...images, outcome: 'discarded' })).toBe(2);
    expect(metricSample(text, 'stampeded_job_failures_total', { ...images, kind: 'raised' })).toBe(3);
    expect(metricSample(text, 'stampeded_job_failures_total', { ...images, kind: 'unrecoverable' })).toBe(1);
    // Every attempt ran a handler: 5 jobs, 2 of them twice.
    expect(metricSample(text, 'stampeded_job_duration_seconds_count', images)).toBe(7);
    expect(metricSample(text, 'stampeded_job_queue_wait_seconds_count', images)).toBe(7);
    expect(metricSample(text, 'stampeded_jobs', { queue: 'images', state: 'completed' })).toBe(3);
    expect(metricSample(text, 'stampeded_jobs', { queue: 'images', state: 'discarded' })).toBe(2);
    expect(metricSample(text, 'stampeded_jobs', { queue: 'backlog', state: 'available' })).toBe(1);
    expect(metricSample(text, 'stampeded_queue_verdict', { queue: 'backlog', verdict: 'hold' })).toBe(1);
    expect(metricSample(text, 'stampeded_queue_verdict', { queue: 'backlog', verdict: 'steady' })).toBe(0);
    expect(metricSample(text, 'stampeded_queue_paused', { queue: 'backlog' })).toBe(1);
    expect(metricSample(text, 'stampeded_queue_paused', { queue: 'images' })).toBe(0);
    expect(metricSample(text, 'stampeded_breaker_state', { destination: 'smtp', state: 'open' })).toBe(1);
    expect(metricSample(text, 'stampeded_breaker_state', { destination: 'smtp', state: 'closed' })).toBe(0);
  });

  it('keeps its metrics in a registry of its own unless given one', async () => {
    const mine = app.get(StampededMetrics).registry;
    expect(mine).toBeInstanceOf(Registry);
    const { register } = await import('prom-client');
    expect(mine).not.toBe(register);
    expect(await register.getSingleMetric('stampeded_jobs')).toBeUndefined();
  });
});
