import { randomUUID } from 'node:crypto';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { InvalidJobError, JobWaitError, QueueService, Task, migrate, type TaskHandler } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { tcpPortsOf } from '../support/chaos.js';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';
import { WorkerProcess } from '../support/worker-process.js';

@Injectable()
@Task('here', { queue: 'here' })
class Here implements TaskHandler<{ n: number }, { tripled: number }> {
  handle(args: { n: number }) {
    return { tripled: args.n * 3 };
  }
}

/** How many waits an app has pending: QueueService's own, not part of its API. */
const pendingWaits = (app: INestApplicationContext): number => (app.get(QueueService) as unknown as { waiters: { pending: number } }).waiters.pending;

/** The backends this process holds that LISTEN (their last statement was a LISTEN), and all of them. */
async function connectionsHere(sql: pg.Client): Promise<{ listening: number; all: number }> {
  const { rows } = await sql.query<{ listening: number; all: number }>(
    `SELECT count(*) FILTER (WHERE query LIKE 'LISTEN %')::int AS listening, count(*)::int AS all
       FROM pg_stat_activity WHERE datname = current_database() AND client_port = ANY($1::int[])`,
    [tcpPortsOf(process.pid)],
  );
  return rows[0];
}

// An API process (worker disabled) enqueues and waits; a worker process of
// its own runs the jobs (test/fixtures/worker-process/events.tasks.mjs).
describe('waitFor()', () => {
  const handle = {} as { db: TestDatabase; sql: pg.Client };
  let worker: WorkerProcess;
  let api: INestApplicationContext;
  let queue: QueueService;
  const extraApps: INestApplicationContext[] = [];

  beforeAll(async () => {
    handle.db = await testDatabase();
    await migrate(handle.db.url);
    handle.sql = await sqlClient(handle.db.url);
    worker = WorkerProcess.start({ url: handle.db.url, tasks: 'events', stampeded: { worker: { pollIntervalMs: 200, heartbeatIntervalMs: 200 } } });
    api = await bootApp(handle.db.url, { via: 'connection', stampeded: { worker: { enabled: false } } });
    queue = api.get(QueueService);
    await worker.ready();
  }, 90_000);

  afterEach(async () => {
    await Promise.all(extraApps.splice(0).map((app) => app.close()));
  });

  afterAll(async () => {
    await api?.close();
    await worker?.stop();
    await handle.sql?.end();
    await handle.db?.drop();
  });

  const row = async (id: string) => (await handle.sql.query(`SELECT state, attempt FROM stampeded_jobs WHERE id = $1`, [id])).rows[0];

  it('resolves, in an API process, with the job another process ran, as getJob() returns it, result and all', async () => {
    const { id } = await queue.enqueue('ok', { n: 21 }, { queue: 'events' });
    const job = await queue.waitFor<{ n: number }, { doubled: number }>(id, { timeoutMs: 30_000 });
    expect(job).toMatchObject({ id, state: 'completed', attempt: 1, args: { n: 21 }, result: { doubled: 42 } });
    expect(job).toEqual(await queue.getJob(id));
    expect(await row(id)).toEqual({ state: 'completed', attempt: 1 });
  });

  it('keeps waiting while the job is retried, and resolves with the attempt that completed it', async () => {
    const { id } = await queue.enqueue('flaky', { failTimes: 2 }, { queue: 'events', backoff: { baseMs: 10, maxMs: 10 } });
    const job = await queue.waitFor(id, { timeoutMs: 30_000 });
    expect(job).toMatchObject({ state: 'completed', attempt: 3, result: { attempts: 3 } });
    expect(job.errors.map((e) => e.attempt)).toEqual([1, 2]);
  });

  it('resolves with a discarded job, and with a job cancelled while it waited', async () => {
    const doomed = await queue.enqueue('doomed', {}, { queue: 'events' });
    expect(await queue.waitFor(doomed.id)).toMatchObject({
      state: 'discarded',
      failureKind: 'unrecoverable',
      lastError: expect.stringContaining('never retry'),
    });

    const slow = await queue.enqueue('slow', {}, { queue: 'events' });
    const waited = queue.waitFor(slow.id);
    await worker.waitFor('started', (e) => e.id === slow.id);
    await queue.cancel(slow.id);
    expect(await waited).toMatchObject({ id: slow.id, state: 'cancelled' });
  });

  it('resolves at once with a job that finished already, whatever its timeout', async () => {
    const { id } = await queue.enqueue('ok', { n: 1 }, { queue: 'events' });
    await waitFor(async () => (await row(id))?.state === 'completed', 'the job, completed');
    expect(await queue.waitFor(id, { timeoutMs: 0 })).toMatchObject({ id, state: 'completed', result: { doubled: 2 } });
  });

  it('rejects at its timeout with an error naming the job and the wait; the job goes on', async () => {
    const { id } = await queue.enqueue('slow', {}, { queue: 'events' });
    await worker.waitFor('started', (e) => e.id === id);
    const err = await queue.waitFor(id, { timeoutMs: 200 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(JobWaitError);
    expect(err).toMatchObject({ jobId: id, reason: 'timed_out' });
    expect((err as Error).message).toContain(`waitFor(${id}): the job did not finish within 200 ms (it is executing)`);
    expect(await row(id)).toEqual({ state: 'executing', attempt: 1 });
    expect(pendingWaits(api)).toBe(0);
    await queue.cancel(id);
  });

  it("rejects with the signal's reason when it aborts; the job goes on", async () => {
    const { id } = await queue.enqueue('slow', {}, { queue: 'events' });
    await worker.waitFor('started', (e) => e.id === id);
    const controller = new AbortController();
    const waited = queue.waitFor(id, { signal: controller.signal });
    await waitFor(() => pendingWaits(api) === 1, 'the wait, registered');
    const reason = new Error('the client went away');
    controller.abort(reason);
    await expect(waited).rejects.toBe(reason);
    expect(pendingWaits(api)).toBe(0);
    expect(await row(id)).toEqual({ state: 'executing', attempt: 1 });
    // Aborted before it starts: nothing is read.
    await expect(queue.waitFor(id, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    await queue.cancel(id);
  });

  it('serves hundreds of waits with the one LISTEN connection of the app, and resolves them all', async () => {
    const before = await connectionsHere(handle.sql);
    expect(before.listening).toBe(1);
    // More than the worker runs at once: most wait unstarted, some run, until cancelled.
    const ids = (await queue.enqueueMany(Array.from({ length: 300 }, () => ({ task: 'slow', options: { queue: 'events' } })))).map((r) => r.id);
    const waits = ids.map((id) => queue.waitFor(id));
    await waitFor(() => pendingWaits(api) === 300, 'the 300 waits, registered');
    const during = await connectionsHere(handle.sql);
    expect(during.listening).toBe(1);
    // The pool's connections and the one that listens, however many wait.
    expect(during.all).toBeLessThanOrEqual(before.all + 10);
    for (const id of ids) await queue.cancel(id);
    const jobs = await Promise.all(waits);
    expect(jobs.map((j) => j.state)).toEqual(ids.map(() => 'cancelled'));
    expect(jobs.map((j) => j.id)).toEqual(ids);
    expect(pendingWaits(api)).toBe(0);
  }, 60_000);

  it('finds a finished job that no notification told of, by its re-check', async () => {
    // events: 'local': this app listens to nothing; only its re-check reads the table.
    const deaf = await bootApp(handle.db.url, { via: 'connection', stampeded: { worker: { enabled: false }, events: 'local' } });
    extraApps.push(deaf);
    const { id } = await deaf.get(QueueService).enqueue('ok', { n: 5 }, { queue: 'events' });
    expect(await deaf.get(QueueService).waitFor(id, { timeoutMs: 30_000 })).toMatchObject({ id, state: 'completed', result: { doubled: 10 } });
  });

  it("resolves from the local event when the app's own worker runs the job", async () => {
    const local = await bootApp(handle.db.url, { via: 'connection', providers: [Here] });
    extraApps.push(local);
    const service = local.get(QueueService);
    const { id } = await service.enqueue(Here, { n: 4 });
    const job = await service.waitFor(Here, id, { timeoutMs: 30_000 });
    expect(job.result).toEqual({ tripled: 12 });
    expect(job.state).toBe('completed');
  });

  it('rejects when the job is removed as it completes, when the app shuts down, and when no such job exists', async () => {
    const removed = await queue.enqueue('ok', { n: 1 }, { queue: 'events', removeOnComplete: true, runAt: new Date(Date.now() + 1500) });
    const gone = await queue.waitFor(removed.id).catch((e: unknown) => e);
    expect(gone).toMatchObject({ name: 'JobWaitError', jobId: removed.id, reason: 'removed' });
    expect((gone as Error).message).toContain('removeOnComplete');

    const closing = await bootApp(handle.db.url, { via: 'connection', stampeded: { worker: { enabled: false } } });
    const { id } = await queue.enqueue('ok', { n: 1 }, { queue: 'events', runAt: new Date(Date.now() + 60_000) });
    const waited = closing
      .get(QueueService)
      .waitFor(id)
      .catch((e: unknown) => e);
    await waitFor(() => pendingWaits(closing) === 1, 'the wait, registered');
    await closing.close();
    expect(await waited).toMatchObject({ name: 'JobWaitError', jobId: id, reason: 'shutdown' });
    await queue.cancel(id);

    const missing = randomUUID();
    const err = await queue.waitFor(missing).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidJobError);
    expect((err as Error).message).toContain(`No job with id ${missing}`);
  });

  it('refuses bad input before it reads anything', async () => {
    const id = randomUUID();
    await expect(queue.waitFor('not-a-uuid')).rejects.toThrow('waitFor(): "not-a-uuid" is not a job id (a UUID).');
    await expect(queue.waitFor(id, { timeoutMs: -1 })).rejects.toThrow(
      'waitFor(): timeoutMs must be a whole number of milliseconds from 0 to 2147483647, got -1.',
    );
    await expect(queue.waitFor(id, { timeoutMs: 1.5 })).rejects.toThrow('timeoutMs must be a whole number');
    await expect(queue.waitFor(id, { signal: {} as AbortSignal })).rejects.toThrow('waitFor(): signal must be an AbortSignal');
    await expect(queue.waitFor(id, { timeout: 5 } as never)).rejects.toThrow('waitFor(): unknown option "timeout". Allowed: queue, timeoutMs, signal.');
    await expect(queue.waitFor(id, 5 as never)).rejects.toThrow('waitFor(): options must be an object { queue?, timeoutMs?, signal? }.');
    expect(pendingWaits(api)).toBe(0);
  });
});
