import { Injectable, type INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { JobEvents, OnJobEvent, QueueService, Task, migrate, type JobEvent, type TaskHandler } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { COMPLETE_MANY_NOTIFY, eventsChannel } from '@stampeded/nestjs/internal';
import { jobSql } from '../support/job-sql.js';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';
import { tcpPortsOf } from '../support/chaos.js';
import { WorkerProcess } from '../support/worker-process.js';

@Injectable()
class Sink {
  events: JobEvent[] = [];
  @OnJobEvent(['completed', 'failed', 'retrying', 'discarded', 'cancelled', 'progress'])
  record(event: JobEvent) {
    this.events.push(event);
  }
}

@Task('mine', { queue: 'mine' })
class Mine implements TaskHandler<{ n: number }> {
  handle(args: { n: number }) {
    return { n: args.n };
  }
}

@Task('quiet', { queue: 'quiet' })
class Quiet implements TaskHandler {
  handle() {}
}

/** Every event an app sees, from the start. */
function record(app: INestApplicationContext): JobEvent[] {
  const seen: JobEvent[] = [];
  app.get(QueueService).events$.subscribe((e) => seen.push(e));
  return seen;
}

/** The backends this process holds that LISTEN (their last statement was a LISTEN). */
async function listenersHere(sql: pg.Client): Promise<number[]> {
  const { rows } = await sql.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %' AND client_port = ANY($1::int[])`,
    [tcpPortsOf(process.pid)],
  );
  return rows.map((r) => r.pid);
}

// An API process (worker disabled) and a worker process of its own: the API
// hears, on events$ and @OnJobEvent, what happened to the jobs the other
// process ran, from the notifications its outcome statements send.
describe('job events across processes', () => {
  const handle = {} as { db: TestDatabase; sql: pg.Client };
  let worker: WorkerProcess;
  let api: INestApplicationContext;
  let queue: QueueService;
  let seen: JobEvent[];
  const extraApps: INestApplicationContext[] = [];
  const eventsOf = (id: string, events: JobEvent[] = seen) => events.filter((e) => e.jobId === id);

  beforeAll(async () => {
    handle.db = await testDatabase();
    await migrate(handle.db.url);
    handle.sql = await sqlClient(handle.db.url);
    worker = WorkerProcess.start({ url: handle.db.url, tasks: 'events', stampeded: { worker: { pollIntervalMs: 200, heartbeatIntervalMs: 200 } } });
    api = await bootApp(handle.db.url, { via: 'connection', providers: [Sink], stampeded: { worker: { enabled: false } } });
    queue = api.get(QueueService);
    seen = record(api);
    await worker.ready();
    // Workers notify only while someone listens, and learn that it does
    // from its announcement or their heartbeat: once a job's event is heard,
    // the worker process knows.
    await waitFor(
      async () => {
        const { id } = await queue.enqueue('ok', { n: 0 }, { queue: 'events' });
        await waitFor(() => eventsOf(id).length, 'a probe', 2000).catch(() => undefined);
        return eventsOf(id).length;
      },
      'the worker process, notifying',
      30_000,
    );
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

  it('tells an API process, on events$ and @OnJobEvent, of a completion in another process', async () => {
    const { id } = await queue.enqueue('ok', { n: 21 }, { queue: 'events' });
    await waitFor(() => eventsOf(id).length, 'the completion, heard');
    expect(eventsOf(id)).toEqual([{ origin: 'fleet', type: 'completed', jobId: id, queue: 'events', task: 'ok', attempt: 1, workerId: worker.workerId }]);
    expect(eventsOf(id, api.get(Sink).events)).toEqual(eventsOf(id));
    const { rows } = await handle.sql.query(`SELECT state, claimed_by FROM stampeded_jobs WHERE id = $1`, [id]);
    expect(rows).toEqual([{ state: 'completed', claimed_by: null }]);
    // The rest is read on demand.
    expect(await queue.getJob(id)).toMatchObject({ id, state: 'completed', args: { n: 21 } });
  });

  it('tells of a failure, its retry and the completion of the retry, in order', async () => {
    // Enqueued by name, the task's own options are the worker's to know: the enqueue gives them.
    const { id } = await queue.enqueue('flaky', { failTimes: 1 }, { queue: 'events', backoff: { baseMs: 10, maxMs: 10 } });
    await waitFor(() => eventsOf(id).some((e) => e.type === 'completed'), 'the retry, completed');
    const base = { origin: 'fleet', jobId: id, queue: 'events', task: 'flaky', workerId: worker.workerId };
    expect(eventsOf(id)).toEqual([
      { ...base, type: 'failed', attempt: 1, failureKind: 'raised' },
      { ...base, type: 'retrying', attempt: 1, failureKind: 'raised', retryDelayMs: expect.any(Number) },
      { ...base, type: 'completed', attempt: 2 },
    ]);
    const { rows } = await handle.sql.query(`SELECT state, attempt, jsonb_array_length(errors) AS errors FROM stampeded_jobs WHERE id = $1`, [id]);
    expect(rows).toEqual([{ state: 'completed', attempt: 2, errors: 1 }]);
  });

  it('tells of a discard, and whether the job was dead-lettered', async () => {
    const { id } = await queue.enqueue('doomed', {}, { queue: 'events', deadLetterQueue: 'events-dead' });
    await waitFor(() => eventsOf(id).some((e) => e.type === 'discarded'), 'the discard');
    const base = { origin: 'fleet', jobId: id, queue: 'events', task: 'doomed', attempt: 1, workerId: worker.workerId, failureKind: 'unrecoverable' };
    expect(eventsOf(id)).toEqual([
      { ...base, type: 'failed' },
      { ...base, type: 'discarded', deadLettered: true },
    ]);
    const { rows } = await handle.sql.query(`SELECT queue, state FROM stampeded_jobs WHERE id = $1 OR source_id = $1 ORDER BY queue`, [id]);
    expect(rows).toEqual([
      { queue: 'events', state: 'discarded' },
      { queue: 'events-dead', state: 'available' },
    ]);
  });

  it("tells of a running job's progress as it is written, before its completion", async () => {
    const { id } = await queue.enqueue('reporting', { total: 3 }, { queue: 'events' });
    await waitFor(() => eventsOf(id).some((e) => e.type === 'completed'), 'the completion');
    const events = eventsOf(id);
    // Written at most once a second: the first report at once, the last before the outcome.
    expect(events.map((e) => e.type)).toEqual([...events.slice(0, -1).map(() => 'progress'), 'completed']);
    expect(events[0]).toEqual({
      origin: 'fleet',
      type: 'progress',
      jobId: id,
      queue: 'events',
      task: 'reporting',
      attempt: 1,
      workerId: worker.workerId,
      progress: { done: 1, total: 3 },
    });
    expect(events.at(-2)?.progress).toEqual({ done: 3, total: 3 });
    expect((await queue.getJob(id))?.progress).toEqual({ done: 3, total: 3 });
  });

  it('tells of a cancel, with the worker that held the job; that worker hears it once, as its own', async () => {
    const { id } = await queue.enqueue('slow', {}, { queue: 'events' });
    await worker.waitFor('started', (e) => e.id === id);
    expect(await queue.cancel(id)).toMatchObject({ cancelled: true, previousState: 'executing' });
    await waitFor(() => eventsOf(id).length, 'the cancel, heard');
    expect(eventsOf(id)).toEqual([{ origin: 'fleet', type: 'cancelled', jobId: id, queue: 'events', task: 'slow', attempt: 1, workerId: worker.workerId }]);
    const { rows } = await handle.sql.query(`SELECT state FROM stampeded_jobs WHERE id = $1`, [id]);
    expect(rows).toEqual([{ state: 'cancelled' }]);
  });

  it('delivers a job run by this app once, as a local event, though its outcome is also notified', async () => {
    const local = await bootApp(handle.db.url, { via: 'connection', providers: [Mine] });
    extraApps.push(local);
    const localSeen = record(local);
    const ids = (await local.get(QueueService).enqueueMany([1, 2, 3, 4, 5].map((n) => ({ task: 'mine', args: { n } })))).map((r) => r.id);
    await waitFor(() => ids.every((id) => eventsOf(id, localSeen).some((e) => e.type === 'completed')), 'the local completions');
    // Notifications arrive in the order they were committed: once this app
    // hears of a job the other process completed afterwards, it has heard
    // everything its own completions sent.
    const sentinel = await queue.enqueue('ok', { n: 1 }, { queue: 'events' });
    await waitFor(() => eventsOf(sentinel.id, localSeen).length, 'the sentinel, heard by the local app');
    for (const id of ids) {
      expect(eventsOf(id, localSeen).map((e) => [e.origin, e.type])).toEqual([
        ['local', 'active'],
        ['local', 'completed'],
      ]);
      // The API process heard them from the fleet, once.
      await waitFor(() => eventsOf(id).length, 'the local job, heard by the API');
      expect(eventsOf(id).map((e) => [e.origin, e.type])).toEqual([['fleet', 'completed']]);
    }
    expect(eventsOf(sentinel.id, localSeen)).toEqual([
      { origin: 'fleet', type: 'completed', jobId: sentinel.id, queue: 'events', task: 'ok', attempt: 1, workerId: worker.workerId },
    ]);
    // And the worker process heard none of the jobs it ran as another's.
    await worker.waitFor('heard', (e) => e.jobId === ids[4]);
    const ranThere = new Set(worker.events.filter((e) => e.event === 'started' || e.event === 'completed').map((e) => e.id));
    expect(worker.events.filter((e) => e.event === 'heard' && ranThere.has(e.jobId as string))).toEqual([]);
  });

  it("with events: 'local', an app hears only its own workers' jobs, and its workers send nothing", async () => {
    const quiet = await bootApp(handle.db.url, { via: 'connection', providers: [Quiet], stampeded: { events: 'local' } });
    extraApps.push(quiet);
    const quietSeen = record(quiet);
    const notified: string[] = [];
    const listener = await sqlClient(handle.db.url);
    try {
      listener.on('notification', (n) => notified.push(n.payload ?? ''));
      await listener.query(`LISTEN "public.stampeded_events"`);
      const { id } = await quiet.get(QueueService).enqueue('quiet', {});
      await waitFor(() => eventsOf(id, quietSeen).some((e) => e.type === 'completed'), 'the quiet job, completed');
      const sentinel = await queue.enqueue('ok', { n: 2 }, { queue: 'events' });
      await waitFor(() => notified.some((p) => p.includes(sentinel.id)), "the sentinel's notification");
      await waitFor(() => eventsOf(sentinel.id).length, 'the sentinel, heard by the API');
      expect(notified.filter((p) => p.includes(id))).toEqual([]);
      expect(eventsOf(id)).toEqual([]);
      expect(quietSeen.filter((e) => e.origin !== 'local')).toEqual([]);
    } finally {
      await listener.end();
    }
  });

  it('names the queue and task of a job whose names are too long to send, from the table', async () => {
    // 1,200 bytes of UTF-8: over what a notification carries. No process has
    // a handler for it: its one attempt fails, and is discarded.
    const task = 'é'.repeat(600);
    const { id } = await queue.enqueue(task, {}, { queue: 'events', maxAttempts: 1 });
    await waitFor(() => eventsOf(id).some((e) => e.type === 'discarded'), 'the discard of the long-named job');
    expect(eventsOf(id).map((e) => [e.type, e.queue, e.task, e.failureKind])).toEqual([
      ['failed', 'events', task, 'raised'],
      ['discarded', 'events', task, 'raised'],
    ]);
  });

  it('notifies a batch of completions a hundred jobs of a queue and task at a time, under 8,000 bytes each, only what committed', async () => {
    const { worker: newWorker, claim } = jobSql(() => handle.sql);
    const workerId = await newWorker();
    const long = 'ü'.repeat(600);
    await handle.sql.query(
      `INSERT INTO stampeded_jobs (queue, task) SELECT 'chunked', CASE WHEN g <= 250 THEN 'x' WHEN g <= 280 THEN 'y' ELSE $1 END FROM generate_series(1, 281) g`,
      [long],
    );
    const claimed = await claim('chunked', workerId, 300);
    expect(claimed).toHaveLength(281);
    const tasks = new Map((await handle.sql.query(`SELECT id::text, task FROM stampeded_jobs WHERE queue = 'chunked'`)).rows.map((r) => [r.id, r.task]));
    // One of them is no longer this worker's: nothing is recorded, or sent, for it.
    const lost = claimed.find((j) => tasks.get(j.id) === 'y')!;
    await handle.sql.query(`SELECT stampeded_cancel($1)`, [lost.id]);

    const notified: string[] = [];
    const listener = await sqlClient(handle.db.url);
    try {
      listener.on('notification', (n) => n.channel === eventsChannel('public') && notified.push(n.payload ?? ''));
      await listener.query(`LISTEN "public.stampeded_events"`);
      const { rows } = await handle.sql.query(COMPLETE_MANY_NOTIFY.text, [
        workerId,
        claimed.map((j) => j.queue),
        claimed.map((j) => j.id),
        claimed.map((j) => j.attempt),
        null,
        claimed.map((j) => tasks.get(j.id)),
        eventsChannel('public'),
      ]);
      const completed = rows.filter((r) => r.id !== null).map((r) => r.id);
      expect(completed).toHaveLength(280);
      expect(completed).not.toContain(lost.id);
      // At most a hundred jobs of one queue and task each, grouped by
      // position in the batch: 281 jobs are three hundreds, each holding
      // some of the three tasks.
      const nulls = rows.filter((r) => r.id === null).length;
      await waitFor(() => notified.length >= nulls, 'the notifications');
      expect(nulls).toBeGreaterThanOrEqual(5);
      expect(nulls).toBeLessThanOrEqual(9);
      expect(notified).toHaveLength(nulls);
      const payloads = notified.map((p) => JSON.parse(p));
      for (const p of notified) expect(Buffer.byteLength(p)).toBeLessThan(8000);
      for (const p of payloads) {
        expect(p.j.length).toBeLessThanOrEqual(100);
        expect(p.q).toBe('chunked');
        for (const [id] of p.j) expect(p.k ?? long).toBe(tasks.get(id));
      }
      // The long name is left out, to be read from the table.
      expect(payloads.filter((p) => p.k === null).map((p) => p.j.length)).toEqual([1]);
      const ids = payloads.flatMap((p) => p.j.map(([id]: [string]) => id));
      expect(ids.sort()).toEqual([...completed].sort());
      expect(payloads.every((p) => p.w === workerId && p.t === 'completed')).toBe(true);
    } finally {
      await listener.end();
    }
  });

  it('listens again after its connection drops; what was sent meanwhile is not replayed, what follows is heard', async () => {
    const events = api.get(JobEvents);
    let reconnections = 0;
    const subscription = events.reconnected$.subscribe(() => reconnections++);
    try {
      const before = await listenersHere(handle.sql);
      expect(before).toHaveLength(1);
      await handle.sql.query(`SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid`, [before]);
      await waitFor(() => reconnections, 'the listener, reconnected');
      const after = await listenersHere(handle.sql);
      expect(after).toHaveLength(1);
      expect(after).not.toEqual(before);
      const { id } = await queue.enqueue('ok', { n: 3 }, { queue: 'events' });
      await waitFor(() => eventsOf(id).length, 'a completion after the reconnect');
      expect(eventsOf(id).map((e) => e.type)).toEqual(['completed']);
    } finally {
      subscription.unsubscribe();
    }
  });
});

// Alone in its database: nobody listens to the events but a plain client.
describe('job events: sent only while someone listens', () => {
  const handle = {} as { db: TestDatabase; sql: pg.Client };
  let app: INestApplicationContext;
  let listener: pg.Client;
  const notified: string[] = [];
  const lock = `SELECT pg_advisory_lock_shared(hashtextextended('stampeded.events.public', 0))`;

  beforeAll(async () => {
    handle.db = await testDatabase();
    await migrate(handle.db.url);
    handle.sql = await sqlClient(handle.db.url);
    app = await bootApp(handle.db.url, { via: 'connection', providers: [Mine], stampeded: { worker: { heartbeatIntervalMs: 200 } } });
    listener = await sqlClient(handle.db.url);
    listener.on('notification', (n) => notified.push(n.payload ?? ''));
    await listener.query(`LISTEN "public.stampeded_events"; LISTEN marker`);
  });

  afterAll(async () => {
    await listener?.end();
    await app?.close();
    await handle.sql?.end();
    await handle.db?.drop();
  });

  /** Runs a job to completion, and says whether its outcome was notified: a marker sent after it comes after any notification of it. */
  async function notifiedOf(n: number): Promise<boolean> {
    const { id } = await app.get(QueueService).enqueue('mine', { n });
    await waitFor(
      async () => (await handle.sql.query(`SELECT 1 FROM stampeded_jobs WHERE id = $1 AND state = 'completed'`, [id])).rowCount,
      'the job, completed',
    );
    await handle.sql.query(`NOTIFY marker, '${id}'`);
    await waitFor(() => notified.includes(id), 'the marker');
    return notified.some((p) => p !== id && p.includes(id));
  }

  it("sends nothing while no connection holds the listeners' lock, though one LISTENs", async () => {
    expect(await notifiedOf(1)).toBe(false);
    expect(await notifiedOf(2)).toBe(false);
  });

  it('sends once a listener holds the lock and announces itself, and stops once it lets go', async () => {
    await listener.query(lock);
    await listener.query(`NOTIFY "public.stampeded_listening", 'a listener'`);
    expect(await notifiedOf(3)).toBe(true);
    await listener.query(`SELECT pg_advisory_unlock_shared(hashtextextended('stampeded.events.public', 0))`);
    // Workers see it at their next heartbeat.
    let n = 4;
    await waitFor(async () => !(await notifiedOf(n++)), 'a job whose outcome is not notified', 20_000);
    // A listener that holds the lock is counted at the heartbeat even if its announcement was missed.
    await listener.query(lock);
    await waitFor(async () => notifiedOf(n++), 'a job whose outcome is notified again', 20_000);
  });
});
