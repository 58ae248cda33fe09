import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { CheckpointError, QueueService, Task, migrate, type JobContext, type TaskHandler } from '@stampeded/nestjs';
import { WorkerOrchestrator } from '@stampeded/nestjs/internal-runtime';
import type { TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';
import { WorkerProcess } from '../support/worker-process.js';

const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/${name}`, import.meta.url));

@Task('sleepy', { queue: 'lifecycle' })
class Sleepy implements TaskHandler<{ ms: number; ignoreAbort?: boolean }> {
  running = 0;
  peak = 0;
  async handle(args: { ms: number; ignoreAbort?: boolean }, ctx: JobContext) {
    this.running++;
    this.peak = Math.max(this.peak, this.running);
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(resolve, args.ms);
        if (!args.ignoreAbort) {
          ctx.signal.addEventListener('abort', () => {
            clearTimeout(timer);
            reject(ctx.signal.reason);
          });
        }
      });
    } finally {
      this.running--;
    }
  }
}

/** Stalls on its first run until its signal fires; completes on the next. */
@Task('stalls-once', { queue: 'lifecycle' })
class StallsOnce implements TaskHandler {
  stalling = false;
  aborted = 0;
  async handle(_: object, ctx: JobContext) {
    if (ctx.attempt > 1) return;
    this.stalling = true;
    await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
    this.stalling = false;
    this.aborted++;
  }
}

@Task('isolated', {
  queue: 'isolated',
  isolation: 'process',
  processFile: fixture('child.process.mjs'),
  maxAttempts: 3,
  maxInterruptions: 5,
  backoff: { baseMs: 30000 },
})
class Isolated implements TaskHandler<{ mode: string }> {
  handle() {
    throw new Error('never runs in the worker process');
  }
}

@Task('big-checkpoint', { queue: 'checkpoints', maxAttempts: 1 })
class BigCheckpoint implements TaskHandler {
  error?: unknown;
  async handle(_: object, ctx: JobContext) {
    try {
      await ctx.saveCheckpoint({ blob: 'x'.repeat(70_000) });
    } catch (err) {
      this.error = err;
    }
  }
}

describe('worker lifecycle', () => {
  let db: TestDatabase;
  let sql: pg.Client;
  const rows = async (q: string, params: unknown[] = []) => (await sql.query(q, params)).rows;

  beforeAll(async () => {
    db = await testDatabase();
    await migrate(db.url);
    sql = await sqlClient(db.url);
  });

  afterAll(async () => {
    await sql?.end();
    await db?.drop();
  });

  beforeEach(async () => {
    await sql.query(`DELETE FROM stampeded_jobs`);
  });

  it('never runs more than concurrency handlers at once', async () => {
    const app = await bootApp(db.url, { providers: [Sleepy], stampeded: { worker: { concurrency: 3 } } });
    const queue = app.get(QueueService);
    await queue.enqueueMany(Array.from({ length: 12 }, () => ({ task: 'sleepy', args: { ms: 100 } })));
    await waitFor(async () => (await queue.counts('lifecycle')).completed === 12, 'all 12 to complete');
    expect(app.get(Sleepy).peak).toBe(3);
    await app.close();
  });

  it('app.close() lets running handlers finish, gives back unstarted jobs, and enqueue works during the drain', async () => {
    const app = await bootApp(db.url, { providers: [Sleepy], stampeded: { worker: { concurrency: 2, prefetch: 2, shutdownTimeoutMs: 5000 } } });
    const queue = app.get(QueueService);
    const workerId = app.get(WorkerOrchestrator).workerId;
    await queue.enqueueMany(Array.from({ length: 8 }, () => ({ task: 'sleepy', args: { ms: 800 } })));
    await waitFor(() => app.get(Sleepy).running === 2, 'two handlers to run');
    const closing = app.close();
    // The pool stays open until the drain ends: enqueueing still works.
    const late = await queue.enqueue('sleepy', { ms: 1 });
    await closing;
    const states = await rows(`SELECT state, attempt, count(*)::int AS n FROM stampeded_jobs GROUP BY 1, 2 ORDER BY 1`);
    expect(states).toEqual([
      { state: 'available', attempt: 0, n: 7 },
      { state: 'completed', attempt: 1, n: 2 },
    ]);
    expect(await rows(`SELECT 1 FROM stampeded_jobs WHERE id = $1 AND state = 'available'`, [late.id])).toHaveLength(1);
    expect(await rows(`SELECT 1 FROM stampeded_workers WHERE id = $1`, [workerId])).toHaveLength(0);
  });

  it('after shutdownTimeoutMs, aborts running handlers and gives their jobs back without spending an attempt', async () => {
    const app = await bootApp(db.url, { providers: [Sleepy], stampeded: { worker: { concurrency: 2, prefetch: 0, shutdownTimeoutMs: 300 } } });
    const queue = app.get(QueueService);
    await queue.enqueueMany(Array.from({ length: 2 }, () => ({ task: 'sleepy', args: { ms: 60_000 } })));
    await waitFor(() => app.get(Sleepy).running === 2, 'two handlers to run');
    const started = Date.now();
    await app.close();
    expect(Date.now() - started).toBeLessThan(5000);
    expect(await rows(`SELECT state, attempt, claimed_by FROM stampeded_jobs`)).toEqual([
      { state: 'available', attempt: 0, claimed_by: null },
      { state: 'available', attempt: 0, claimed_by: null },
    ]);
  });

  it('SIGTERM drains a worker process: running jobs finish, unstarted ones go back at once', async () => {
    const queueApp = await bootApp(db.url, { stampeded: { worker: { enabled: false } } });
    const queue = queueApp.get(QueueService);
    // This process has no 'sleepy' handler, so the queue is named.
    await queue.enqueueMany(Array.from({ length: 6 }, () => ({ task: 'sleepy', args: { ms: 1000 }, options: { queue: 'lifecycle' } })));
    const child = WorkerProcess.start({
      url: db.url,
      tasks: 'lifecycle',
      shutdown: 'nest',
      stampeded: { worker: { concurrency: 2, shutdownTimeoutMs: 10000, pollIntervalMs: 200 } },
    });
    try {
      await waitFor(async () => (await queue.counts('lifecycle')).executing >= 2, 'the child to run jobs');
      // Nest's shutdown hook closes the app, then raises the signal again: a
      // clean SIGTERM exit, after the drain.
      expect(await child.stop()).toEqual({ code: null, signal: 'SIGTERM' });
    } finally {
      await child.kill();
      await queueApp.close();
    }
    const states = await rows(`SELECT state, count(*)::int AS n FROM stampeded_jobs GROUP BY 1 ORDER BY 1`);
    expect(states.find((s) => s.state === 'executing')).toBeUndefined();
    expect(states.find((s) => s.state === 'completed')?.n).toBeGreaterThanOrEqual(2);
    expect(states.reduce((sum, s) => sum + s.n, 0)).toBe(6);
    expect(await rows(`SELECT 1 FROM stampeded_workers`)).toHaveLength(0);
  });

  it('isolation: process runs the job in a child; its death is worker_exited with the exit status', async () => {
    const app = await bootApp(db.url, { providers: [Isolated] });
    const queue = app.get(QueueService);
    const ok = await queue.enqueue('isolated', { mode: 'ok' });
    const exit = await queue.enqueue('isolated', { mode: 'exit' });
    const kill = await queue.enqueue('isolated', { mode: 'kill' });
    const thrown = await queue.enqueue('isolated', { mode: 'throw' });
    const checkpoint = await queue.enqueue('isolated', { mode: 'checkpoint' });
    const context = await queue.enqueue('isolated', { mode: 'context' }, { orderingKey: 'isolated-line', tenantId: 'acme' });
    const byId = async () => Object.fromEntries((await rows(`SELECT * FROM stampeded_jobs`)).map((r) => [r.id, r]));
    const all = await waitFor(async () => {
      const jobs = await byId();
      return [ok, exit, kill, thrown, checkpoint, context].every((j) => ['completed', 'retryable'].includes(jobs[j.id]?.state)) && jobs;
    }, 'every isolated job to finish its attempt');
    expect(all[ok.id].state).toBe('completed');
    // The child's ctx carries the job's key, as the worker's does.
    expect(all[context.id]).toMatchObject({ state: 'completed', result: { orderingKey: 'isolated-line', tenantId: 'acme' } });
    if (all[checkpoint.id].state !== 'completed') throw new Error(`checkpoint job: ${all[checkpoint.id].last_error}`);
    expect(all[checkpoint.id]).toMatchObject({ state: 'completed', checkpoint_seq: 1 });
    expect(all[exit.id]).toMatchObject({ state: 'retryable', failure_kind: 'worker_exited', interruptions: 1 });
    expect(all[exit.id].errors[0]).toMatchObject({ kind: 'worker_exited', exit_status: 3 });
    expect(all[kill.id].errors[0]).toMatchObject({ kind: 'worker_exited', exit_status: 137 });
    expect(all[kill.id].last_error).toContain('SIGKILL');
    expect(all[thrown.id]).toMatchObject({ state: 'retryable', failure_kind: 'raised' });
    expect(all[thrown.id].last_error).toContain('boom in child');
    await app.close();
  });

  it('a checkpoint over 64 KB is refused with a clear error', async () => {
    const app = await bootApp(db.url, { providers: [BigCheckpoint] });
    await app.get(QueueService).enqueue('big-checkpoint', {});
    const error = await waitFor(() => app.get(BigCheckpoint).error, 'the checkpoint to be refused');
    expect(error).toBeInstanceOf(CheckpointError);
    expect((error as Error).message).toMatch(/Checkpoint is \d+ bytes; the limit is 65536 bytes.*Store a cursor/);
    await app.close();
  });

  it('a worker found reaped while it runs stops its jobs, records heartbeat_lost, and comes back under its id', async () => {
    const app = await bootApp(db.url, { providers: [StallsOnce], stampeded: { worker: { concurrency: 1, heartbeatIntervalMs: 100 } } });
    const queue = app.get(QueueService);
    const workerId = app.get(WorkerOrchestrator).workerId;
    const { id } = await queue.enqueue('stalls-once', {});
    await waitFor(() => app.get(StallsOnce).stalling, 'the first run to stall');
    // What the reaper does to a worker it declared dead: its row goes.
    await sql.query(`DELETE FROM stampeded_workers WHERE id = $1`, [workerId]);
    // An interruption is due again at once, and this worker, back under its
    // id, claims it again: the second run completes. Between the two runs
    // the job is 'retryable' for a moment only, too short to wait for.
    const [job] = await waitFor(async () => {
      const found = await rows(
        `SELECT state, attempt, interruptions, attempted_by,
                jsonb_path_query_array(errors, '$[*].kind') AS kinds, jsonb_path_query_array(errors, '$[*].attempt') AS attempts
           FROM stampeded_jobs WHERE id = $1`,
        [id],
      );
      return found[0]?.state === 'completed' ? found : undefined;
    }, 'the job to run again and complete');
    expect(job).toEqual({
      state: 'completed',
      attempt: 2,
      interruptions: 1,
      attempted_by: [workerId, workerId],
      kinds: ['heartbeat_lost'],
      attempts: [1],
    });
    // The first run's signal fired: the stalled handler stopped.
    expect(app.get(StallsOnce).aborted).toBe(1);
    await waitFor(async () => (await rows(`SELECT 1 FROM stampeded_workers WHERE id = $1`, [workerId])).length === 1, 'the row to be back');
    await app.close();
  });

  it('a worker that lost its job records nothing', async () => {
    const app = await bootApp(db.url, { providers: [Sleepy], stampeded: { worker: { concurrency: 1 } } });
    const queue = app.get(QueueService);
    const lost = new Promise((resolve) => queue.events$.subscribe((e) => e.type === 'lost' && resolve(e)));
    const { id } = await queue.enqueue('sleepy', { ms: 600, ignoreAbort: true });
    await waitFor(() => app.get(Sleepy).running === 1, 'the handler to run');
    // What the reaper does to a job whose worker went silent: it is no longer this worker's.
    await sql.query(
      `UPDATE stampeded_jobs SET state = 'retryable', claimed_by = NULL, failure_kind = 'worker_missing', scheduled_at = now() + interval '1 hour' WHERE id = $1`,
      [id],
    );
    await lost;
    expect(await rows(`SELECT state, failure_kind, finished_at FROM stampeded_jobs WHERE id = $1`, [id])).toEqual([
      { state: 'retryable', failure_kind: 'worker_missing', finished_at: null },
    ]);
    await app.close();
  });
});
