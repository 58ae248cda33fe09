import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { QueueService, Task, type EnqueueOptions, type JobContext, type TaskHandler } from '@stampeded/nestjs';
import { bootApp, migratedDatabase, waitFor } from '../support/test-app.js';

/** Labels of the jobs in the order their handlers started. */
const started: string[] = [];
let openGate: () => void = () => undefined;

@Task('long', { queue: 'ranked' })
class Long implements TaskHandler {
  async handle(_: object, ctx: JobContext) {
    started.push('long');
    const gate = new Promise<void>((resolve) => (openGate = resolve));
    await Promise.race([gate, new Promise((resolve) => ctx.signal.addEventListener('abort', resolve))]);
  }
}

@Task('ranked', { queue: 'ranked' })
class Ranked implements TaskHandler<{ label: string }> {
  async handle(args: { label: string }) {
    started.push(args.label);
  }
}

@Task('paced', { queue: 'paced' })
class Paced implements TaskHandler<{ label: string }> {
  async handle(args: { label: string }) {
    // Long enough that the claim loop ends before the slot frees.
    await new Promise((resolve) => setTimeout(resolve, 5));
    started.push(args.label);
  }
}

/** The four jobs, in the order they are enqueued. */
const FOUR: [string, EnqueueOptions][] = [
  ['5', { priority: 5 }],
  ['0', { priority: 0 }],
  ['2', { priority: 2 }],
  ['overdue-2', { priority: 2, runAt: new Date(Date.now() - 60_000) }],
];

describe('claim order across the local buffer', () => {
  const database = migratedDatabase();
  let db: { url: string };
  let sql: pg.Client;
  let app: INestApplicationContext | undefined;

  const executing = async () => (await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE state = 'executing'`)).rows[0].n;

  beforeAll(() => {
    ({ db, sql } = database);
  });

  beforeEach(async () => {
    started.length = 0;
    await sql.query(`DELETE FROM stampeded_jobs`);
  });

  afterEach(async () => {
    openGate();
    await app?.close();
    app = undefined;
  });

  it("with prefetch 'auto', a job waiting when the slot frees runs before a worse one enqueued earlier", async () => {
    app = await bootApp(db.url, { providers: [Long, Ranked], stampeded: { worker: { concurrency: 1 } } });
    const queue = app.get(QueueService);
    await queue.enqueue('long', {});
    await waitFor(() => started.includes('long'), 'the long job to start');
    for (const [label, options] of FOUR) {
      await queue.enqueue('ranked', { label }, options);
      // Nothing observable happens when the worker rightly leaves the job in
      // the queue, so there is no signal to wait on: the pause lets each
      // insert be notified and seen on its own, as a trickle of jobs is.
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    openGate();
    await waitFor(() => started.length === 5, 'all five jobs to start');
    expect(started).toEqual(['long', '0', 'overdue-2', '2', '5']);
  });

  it('with an explicit prefetch, jobs are claimed ahead and start in priority order from the buffer', async () => {
    app = await bootApp(db.url, { providers: [Long, Ranked], stampeded: { worker: { concurrency: 1, prefetch: 3 } } });
    const queue = app.get(QueueService);
    await queue.enqueue('long', {});
    await waitFor(() => started.includes('long'), 'the long job to start');
    // Each one claimed ahead, behind the running long job, by a claim of its own.
    for (const [i, [label, options]] of FOUR.slice(0, 3).entries()) {
      await queue.enqueue('ranked', { label }, options);
      await waitFor(async () => (await executing()) === i + 2, `job ${label} to be claimed ahead`);
    }
    openGate();
    await waitFor(() => started.length === 4, 'all four jobs to start');
    expect(started).toEqual(['long', '0', '2', '5']);
  });

  it("with prefetch 'auto', a worker draining a backlog of short jobs claims ahead of its free slots", async () => {
    app = await bootApp(db.url, { providers: [Long, Ranked], stampeded: { worker: { concurrency: 1 } } });
    const queue = app.get(QueueService);
    const count = 2000;
    await queue.enqueueMany(Array.from({ length: count }, (_, n) => ({ task: 'ranked', args: { label: String(n) } })));
    await waitFor(async () => (await queue.counts('ranked')).completed === count, 'the backlog to be completed', 60_000);
    // One claim statement stamps all its jobs with one claimed_at; at
    // concurrency 1 a claim of more than one job is a claim ahead.
    const { rows } = await sql.query(
      `SELECT max(n)::int AS largest FROM (SELECT count(*) AS n FROM stampeded_jobs WHERE queue = 'ranked' GROUP BY claimed_at) c`,
    );
    expect(rows[0].largest).toBeGreaterThan(1);
  });

  it('without prefetch, a freed slot claims the next job at once, never waiting for the poll', async () => {
    // Jobs in the queue before the worker starts, and a poll too far off to
    // help: after the first claim, only the slots the jobs free can start
    // the next ones. A slot freed while a claim loop is ending must still
    // lead to a claim, or the queue stalls here until the poll.
    await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, args) SELECT 'paced', 'paced', jsonb_build_object('label', i::text) FROM generate_series(1, 60) i`,
    );
    app = await bootApp(db.url, {
      providers: [Paced],
      stampeded: { worker: { concurrency: 1, prefetch: 0, claimBatchSize: 1, pollIntervalMs: 600_000 }, maintenance: { enabled: false } },
    });
    await waitFor(() => started.length === 60, 'all sixty jobs to start, one claim each');
    expect(new Set(started).size).toBe(60);
  });
});
