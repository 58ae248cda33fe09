import { fileURLToPath } from 'node:url';
import type { INestApplicationContext } from '@nestjs/common';
import { firstValueFrom, filter, take, toArray } from 'rxjs';
import type pg from 'pg';
import { ProgressError, QueueService, Task, migrate, type JobContext, type TaskHandler } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { jobSql } from '../support/job-sql.js';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';

// ctx.progress(): stored with the job (migration 9), written at most once
// a second whatever the handler's rate, the last value winning, and fenced
// like every write of a running job.

const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/${name}`, import.meta.url));

/** A promise the test settles, and whether it has been. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

@Task('tight-loop', { queue: 'progress' })
class TightLoop implements TaskHandler<{ upTo: number }> {
  answers = new Set<boolean>();
  async handle(args: { upTo: number }, ctx: JobContext) {
    for (let done = 1; done <= args.upTo; done++) this.answers.add(await ctx.progress({ done, total: args.upTo }));
    return { done: args.upTo };
  }
}

/** Reports every few milliseconds for a while, then waits for the test before it returns. */
@Task('steady', { queue: 'progress' })
class Steady implements TaskHandler<{ reports: number }> {
  release = gate();
  async handle(args: { reports: number }, ctx: JobContext) {
    for (let n = 1; n <= args.reports; n++) {
      await ctx.progress(n);
      await new Promise((r) => setTimeout(r, 20));
    }
    await this.release.opened;
  }
}

/** Reports once, then waits until the test has cancelled it and its signal fired, then reports again. */
@Task('cancelled-midway', { queue: 'progress' })
class CancelledMidway implements TaskHandler {
  started = gate();
  after?: boolean;
  async handle(_: object, ctx: JobContext) {
    await ctx.progress({ step: 1 });
    this.started.open();
    await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
    this.after = await ctx.progress({ step: 2 });
  }
}

@Task('refused', { queue: 'progress', maxAttempts: 1 })
class Refused implements TaskHandler {
  async handle(_: object, ctx: JobContext) {
    await ctx.progress({ step: 'fine' });
    try {
      await ctx.progress({ log: 'x'.repeat(2000) });
    } catch (err) {
      return { refused: err instanceof ProgressError, message: (err as Error).message };
    }
    return { refused: false };
  }
}

@Task('isolated-progress', { queue: 'progress', isolation: 'process', processFile: fixture('child.process.mjs'), maxAttempts: 1 })
class IsolatedProgress implements TaskHandler {
  handle(): never {
    throw new Error('runs in a child process');
  }
}

const TASKS = [TightLoop, Steady, CancelledMidway, Refused, IsolatedProgress];

describe('progress', () => {
  let db: TestDatabase;
  let worker: INestApplicationContext;
  let api: INestApplicationContext;
  let queue: QueueService;
  let sql: pg.Client;

  /** Every write of a job's progress, in order, as a trigger of the test's own saw it. */
  const writes = async (id: string) =>
    (await sql.query(`SELECT progress FROM progress_writes WHERE id = $1 ORDER BY n`, [id])).rows.map((r) => r.progress as unknown);
  const finished = (id: string, state = 'completed') =>
    waitFor(async () => {
      const job = await queue.getJob(id);
      return job?.state === state ? job : null;
    }, `job ${id} to be ${state}`);

  beforeAll(async () => {
    db = await testDatabase();
    await migrate(db.url);
    sql = await sqlClient(db.url);
    await sql.query(`
      CREATE TABLE progress_writes (n bigserial PRIMARY KEY, id uuid NOT NULL, progress jsonb);
      CREATE FUNCTION progress_written() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
          INSERT INTO progress_writes (id, progress) VALUES (NEW.id, NEW.progress);
          RETURN NULL;
      END $$;
      CREATE TRIGGER progress_written AFTER UPDATE OF progress ON stampeded_jobs FOR EACH ROW EXECUTE FUNCTION progress_written();`);
    worker = await bootApp(db.url, { providers: TASKS, stampeded: { migrations: 'none', worker: { concurrency: 10 } } });
    // The API process: it enqueues and reads, and runs nothing.
    api = await bootApp(db.url, { via: 'connection', providers: TASKS, stampeded: { migrations: 'none', worker: { enabled: false } } });
    queue = api.get(QueueService);
  });

  afterAll(async () => {
    await api?.close();
    await worker?.close();
    await sql?.end();
    await db?.drop();
  });

  it('a handler reporting 10,000 times in a tight loop writes twice: its first report at once, its last before the outcome', async () => {
    const { id } = await queue.enqueue('tight-loop', { upTo: 10_000 });
    const job = await finished(id);
    expect(job.progress).toEqual({ done: 10_000, total: 10_000 });
    expect(job.result).toEqual({ done: 10_000 });
    expect(await writes(id)).toEqual([
      { done: 1, total: 10_000 },
      { done: 10_000, total: 10_000 },
    ]);
    expect([...worker.get(TightLoop).answers]).toEqual([true]);
  });

  it('a handler reporting for a while writes far fewer times than it reports, and another app sees its last value while it runs', async () => {
    const steady = worker.get(Steady);
    const events = firstValueFrom(
      worker.get(QueueService).events$.pipe(
        filter((e) => e.type === 'progress' && e.task === 'steady'),
        take(2),
        toArray(),
      ),
    );
    const { id } = await queue.enqueue('steady', { reports: 100 });
    // The last report is written within an interval of it, while the handler still runs.
    const running = await waitFor(async () => {
      const job = await queue.getJob(id);
      return job?.progress === 100 ? job : null;
    }, 'the last progress to be written');
    expect(running.state).toBe('executing');
    steady.release.open();
    await finished(id);
    const written = await writes(id);
    // 100 reports over at least 2 s (20 ms apart): the first, one an interval, the last.
    expect(written.length).toBeGreaterThanOrEqual(3);
    expect(written.length).toBeLessThan(100);
    expect(written[0]).toBe(1);
    expect(written.at(-1)).toBe(100);
    expect(written).toEqual([...written].sort((a, b) => (a as number) - (b as number)));
    // The in-process event carries each value written, for a listener to forward.
    expect((await events).map((e) => e.progress)).toEqual(written.slice(0, 2));
  });

  it('after the job is cancelled, progress() answers false and writes nothing', async () => {
    const handler = worker.get(CancelledMidway);
    const { id } = await queue.enqueue('cancelled-midway', {});
    await handler.started.opened;
    await waitFor(async () => (await writes(id)).length === 1, 'the first progress to be written');
    expect((await queue.cancel(id)).cancelled).toBe(true);
    await waitFor(() => handler.after !== undefined, 'the handler to report after its cancellation');
    expect(handler.after).toBe(false);
    expect(await writes(id)).toEqual([{ step: 1 }]);
    expect(await queue.getJob(id)).toMatchObject({ state: 'cancelled', progress: { step: 1 } });
  });

  it('refuses a progress over 1 KB with a ProgressError, which the handler can catch, and writes nothing of it', async () => {
    const { id } = await queue.enqueue('refused', {});
    const job = await finished(id);
    const bytes = JSON.stringify({ log: 'x'.repeat(2000) }).length;
    expect(job.result).toEqual({ refused: true, message: expect.stringContaining(`Progress is ${bytes} bytes as JSON; the limit is 1024 bytes (1 KB).`) });
    expect(job.progress).toEqual({ step: 'fine' });
    expect(await writes(id)).toEqual([{ step: 'fine' }]);
  });

  it('a task with isolation: process reports progress through its context, and its return value is stored', async () => {
    const { id } = await queue.enqueue('isolated-progress', { mode: 'progress', upTo: 500 });
    const job = await finished(id);
    expect(job.progress).toEqual({ done: 500, of: 500 });
    expect(job.result).toMatchObject({
      answers: [true],
      refused: expect.stringMatching(/^ProgressError: ctx\.progress\(\) takes a finite number or a plain JSON object/),
    });
    expect((job.result as { pid: number }).pid).not.toBe(process.pid);
    const written = await writes(id);
    expect(written.length).toBeLessThan(500);
    expect(written.at(-1)).toEqual({ done: 500, of: 500 });
  });

  describe('in the database', () => {
    const { worker: workerRow, claim } = jobSql(() => sql);
    const progress = async (job: { queue: string; id: string; attempt: number }, workerId: string, value: unknown) =>
      (await sql.query(`SELECT stampeded_progress($1, $2, $3, $4, $5::jsonb) AS owned`, [job.queue, job.id, workerId, job.attempt, JSON.stringify(value)]))
        .rows[0].owned as boolean | null;
    const stored = async (id: string) => (await sql.query(`SELECT progress, heartbeat_at FROM stampeded_jobs WHERE id = $1`, [id])).rows[0];

    it('writes only while the worker holds this attempt of the executing job, and counts as a touch', async () => {
      const [a, b] = [await workerRow(), await workerRow()];
      await sql.query(`INSERT INTO stampeded_jobs (queue, task) VALUES ('fence', 'x')`);
      const [job] = await claim('fence', a, 1);
      const claimed = await stored(job.id);
      expect(await progress(job, a, { step: 1 })).toBe(true);
      const after = await stored(job.id);
      expect(after.progress).toEqual({ step: 1 });
      expect(after.heartbeat_at.getTime()).toBeGreaterThanOrEqual(claimed.heartbeat_at.getTime());
      // Another worker, or an earlier attempt of this one: nothing.
      expect(await progress(job, b, { step: 'b' })).toBeNull();
      expect(await progress({ ...job, attempt: job.attempt - 1 }, a, { step: 'old attempt' })).toBeNull();
      expect((await stored(job.id)).progress).toEqual({ step: 1 });
    });

    it('writes nothing for a worker whose job was cancelled, or reaped and claimed again by another', async () => {
      const [a, b] = [await workerRow(), await workerRow()];
      const { rows } = await sql.query(`INSERT INTO stampeded_jobs (queue, task) SELECT 'reaped', 'x' FROM generate_series(1, 2) RETURNING id::text`);
      const [first, second] = await claim('reaped', a, 2);
      expect(await progress(first, a, 1)).toBe(true);
      expect(await progress(second, a, 1)).toBe(true);

      await sql.query(`SELECT * FROM stampeded_cancel($1)`, [first.id]);
      expect(await progress(first, a, 2)).toBeNull();
      expect((await stored(first.id)).progress).toBe(1);

      // a is silent past the reaper's threshold: its job goes back, and b claims it.
      await sql.query(`UPDATE stampeded_workers SET last_heartbeat = now() - interval '1 hour' WHERE id = $1`, [a]);
      expect((await sql.query(`SELECT id::text FROM stampeded_reap(interval '1 minute')`)).rows.map((r) => r.id)).toContain(second.id);
      await sql.query(`UPDATE stampeded_jobs SET scheduled_at = now() WHERE id = $1`, [second.id]);
      const [again] = await claim('reaped', b, 1);
      expect(again.id).toBe(second.id);
      expect(await progress(second, a, 2)).toBeNull();
      expect(await progress(again, b, 3)).toBe(true);
      expect((await stored(second.id)).progress).toBe(3);
      expect(rows).toHaveLength(2);
    });
  });
});
