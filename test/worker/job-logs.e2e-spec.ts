import { fileURLToPath } from 'node:url';
import type { INestApplicationContext } from '@nestjs/common';
import { firstValueFrom, filter } from 'rxjs';
import type pg from 'pg';
import { QueueService, Task, migrate, type JobContext, type JobLogs, type TaskHandler } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { cli } from '../support/cli.js';
import { jobSql } from '../support/job-sql.js';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';
import { WorkerProcess } from '../support/worker-process.js';

// ctx.log(): lines stored with the job (migration 16), bounded per job with
// the older ones counted, written in batches whatever the handler's rate,
// fenced like every write of a running job, across process isolation and
// across a fleet of processes.

const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/${name}`, import.meta.url));

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/** Logs four lines and fails on its first attempt, three on its second (the last one too long), with room for five. */
@Task('retried', { queue: 'logs', maxAttempts: 2, retryPolicy: () => ({ retry: true, delayMs: 10 }), logs: { maxLines: 5, maxLineBytes: 100 } })
class Retried implements TaskHandler {
  async handle(_: object, ctx: JobContext) {
    const lines = ctx.attempt === 1 ? 4 : 2;
    for (let n = 1; n <= lines; n++) ctx.log(`attempt ${ctx.attempt} line ${n}`);
    if (ctx.attempt === 1) throw new Error('first attempt fails');
    ctx.log(`multi\nline <b>${'é'.repeat(100)}`);
  }
}

@Task('tight-loop', { queue: 'logs' })
class TightLoop implements TaskHandler<{ upTo: number }> {
  async handle(args: { upTo: number }, ctx: JobContext) {
    for (let n = 1; n <= args.upTo; n++) ctx.log(`line ${n}`);
  }
}

/** Logs a line every few milliseconds for a while, then waits for the test before it returns. */
@Task('steady', { queue: 'logs' })
class Steady implements TaskHandler<{ lines: number }> {
  release = gate();
  async handle(args: { lines: number }, ctx: JobContext) {
    for (let n = 1; n <= args.lines; n++) {
      ctx.log(`step ${n}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    await this.release.opened;
  }
}

/** Logs once, then waits until its cancellation fires its signal, then logs again. */
@Task('cancelled-midway', { queue: 'logs' })
class CancelledMidway implements TaskHandler {
  started = gate();
  async handle(_: object, ctx: JobContext) {
    ctx.log('before the cancel');
    this.started.open();
    await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
    ctx.log('after the cancel');
  }
}

/** Logs once, then waits for the test, which takes the job from this worker in the database meanwhile, then logs again. */
@Task('taken', { queue: 'logs' })
class Taken implements TaskHandler {
  started = gate();
  proceed = gate();
  async handle(_: object, ctx: JobContext) {
    ctx.log('while the job is ours');
    this.started.open();
    await this.proceed.opened;
    ctx.log('after the job was taken');
  }
}

@Task('removed', { queue: 'logs', removeOnComplete: true })
class Removed implements TaskHandler {
  async handle(_: object, ctx: JobContext) {
    ctx.log('gone with the job');
  }
}

@Task('isolated-logs', { queue: 'logs', isolation: 'process', processFile: fixture('child.process.mjs'), maxAttempts: 1 })
class IsolatedLogs implements TaskHandler {
  handle(): never {
    throw new Error('runs in a child process');
  }
}

const TASKS = [Retried, TightLoop, Steady, CancelledMidway, Taken, Removed, IsolatedLogs];

describe('job logs', () => {
  let db: TestDatabase;
  let worker: INestApplicationContext;
  let api: INestApplicationContext;
  let queue: QueueService;
  let sql: pg.Client;

  /** How many statements inserted a job's lines, and how many lines each, as a trigger of the test's own saw them. */
  const inserts = async (id: string) => (await sql.query(`SELECT lines FROM log_inserts WHERE job_id = $1 ORDER BY n`, [id])).rows.map((r) => Number(r.lines));
  const logsOf = async (id: string): Promise<JobLogs> => (await queue.getJob(id, { logs: true }))!.logs!;
  const messages = (logs: JobLogs) => logs.lines.map((l) => l.message);
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
      CREATE TABLE log_inserts (n bigserial PRIMARY KEY, job_id uuid NOT NULL, lines integer NOT NULL);
      CREATE FUNCTION log_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
          INSERT INTO log_inserts (job_id, lines) SELECT job_id, count(*) FROM added GROUP BY job_id;
          RETURN NULL;
      END $$;
      CREATE TRIGGER log_inserted AFTER INSERT ON stampeded_job_logs REFERENCING NEW TABLE AS added
          FOR EACH STATEMENT EXECUTE FUNCTION log_inserted();`);
    worker = await bootApp(db.url, { providers: TASKS, stampeded: { migrations: 'none', worker: { concurrency: 10, queues: ['logs'] } } });
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

  it("keeps a job's newest lines over its attempts, in order, each with its attempt, cut to the task's size, and counts the dropped", async () => {
    const { id } = await queue.enqueue('retried', {});
    await finished(id);
    const logs = await logsOf(id);
    expect(messages(logs)).toEqual(['attempt 1 line 3', 'attempt 1 line 4', 'attempt 2 line 1', 'attempt 2 line 2', expect.any(String)]);
    expect(logs.lines.map((l) => l.attempt)).toEqual([1, 1, 2, 2, 2]);
    expect(logs.dropped).toBe(2);
    const long = logs.lines[4].message;
    expect(long).toMatch(/^multi\nline <b>é+ … \[cut from 214 bytes\]$/);
    expect(Buffer.byteLength(long)).toBeLessThanOrEqual(100);
    const times = logs.lines.map((l) => l.at.getTime());
    expect(times).toEqual([...times].sort((a, b) => a - b));
    // Without { logs: true }, getJob() reads no lines.
    expect((await queue.getJob(id))!.logs).toBeUndefined();

    // What `stampeded jobs show` prints of them.
    const shown = await cli(db.url, ['jobs', 'show', id]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(['log:        ', '  (2 older lines dropped)', `  #1 ${logs.lines[0].at.toISOString()} attempt 1 line 3`].join('\n'));
    expect(shown.stdout).toContain(`  #2 ${logs.lines[4].at.toISOString()} multi\n    line <b>é`);
    expect((await cli(db.url, ['jobs', 'show', id, '--json'])).json().logs).toEqual({
      dropped: 2,
      lines: logs.lines.map((l) => ({ ...l, at: l.at.toISOString() })),
    });
  });

  it('a handler logging 10,000 lines in a tight loop writes twice: its first line at once, the newest 100 before the outcome', async () => {
    const { id } = await queue.enqueue('tight-loop', { upTo: 10_000 });
    await finished(id);
    const logs = await logsOf(id);
    expect(messages(logs)).toEqual(Array.from({ length: 100 }, (_, i) => `line ${9901 + i}`));
    expect(logs.dropped).toBe(9900);
    expect(await inserts(id)).toEqual([1, 100]);
    expect(Number((await sql.query(`SELECT count(*) AS n FROM stampeded_job_logs WHERE job_id = $1`, [id])).rows[0].n)).toBe(100);
  });

  it('a handler logging for a while writes its lines while it runs, far fewer times than it logs, and another app reads them', async () => {
    const { id } = await queue.enqueue('steady', { lines: 100 });
    // The last line is written within an interval of it, while the handler still waits.
    await waitFor(async () => (await logsOf(id)).lines.at(-1)?.message === 'step 100', 'the last line to be written');
    expect((await queue.getJob(id))!.state).toBe('executing');
    worker.get(Steady).release.open();
    await finished(id);
    expect(messages(await logsOf(id))).toEqual(Array.from({ length: 100 }, (_, i) => `step ${i + 1}`));
    // 100 lines over at least 2 s (20 ms apart): the first, about one write a second, and none at the end.
    const written = await inserts(id);
    expect(written.length).toBeGreaterThanOrEqual(3);
    expect(written.length).toBeLessThan(20);
    expect(written[0]).toBe(1);
  });

  it('after the job is cancelled, its lines are no longer written', async () => {
    const handler = worker.get(CancelledMidway);
    const { id } = await queue.enqueue('cancelled-midway', {});
    await handler.started.opened;
    await waitFor(async () => (await logsOf(id)).lines.length === 1, 'the first line to be written');
    const lost = firstValueFrom(worker.get(QueueService).events$.pipe(filter((e) => e.type === 'cancelled' && e.jobId === id)));
    expect((await queue.cancel(id)).cancelled).toBe(true);
    await lost;
    await finished(id, 'cancelled');
    expect(messages(await logsOf(id))).toEqual(['before the cancel']);
    expect(await inserts(id)).toEqual([1]);
  });

  it('a worker whose job was taken from it in the database writes none of the lines it logs after, and learns it lost the job', async () => {
    const handler = worker.get(Taken);
    const { id } = await queue.enqueue('taken', {});
    await handler.started.opened;
    await waitFor(async () => (await logsOf(id)).lines.length === 1, 'the first line to be written');
    // As a reap and another worker's claim leave it, with nothing said to this worker.
    const { worker: workerRow } = jobSql(() => sql);
    const other = await workerRow();
    await sql.query(`UPDATE stampeded_jobs SET claimed_by = $2, attempt = attempt + 1 WHERE id = $1`, [id, other]);
    const lost = firstValueFrom(worker.get(QueueService).events$.pipe(filter((e) => e.type === 'lost' && e.jobId === id)));
    handler.proceed.open();
    await lost;
    expect(await logsOf(id)).toMatchObject({ lines: [{ message: 'while the job is ours', attempt: 1 }], dropped: 0 });
    expect(await inserts(id)).toEqual([1]);
    expect((await queue.getJob(id))!.state).toBe('executing');
  });

  it('a job removed on completion takes its lines with it', async () => {
    const completed = firstValueFrom(worker.get(QueueService).events$.pipe(filter((e) => e.type === 'completed' && e.task === 'removed')));
    const { id } = await queue.enqueue('removed', {});
    await completed;
    expect(await queue.getJob(id)).toBeNull();
    expect(await inserts(id)).toEqual([1]);
    expect((await sql.query(`SELECT count(*)::int AS n FROM stampeded_job_logs WHERE job_id = $1`, [id])).rows[0].n).toBe(0);
  });

  it('a task with isolation: process logs through its context, and its lines are kept as any other', async () => {
    const { id } = await queue.enqueue('isolated-logs', { mode: 'log', lines: 150 });
    const job = await finished(id);
    const logs = await logsOf(id);
    const pid = (job.result as { pid: number }).pid;
    expect(pid).not.toBe(process.pid);
    expect(messages(logs)).toEqual([...Array.from({ length: 99 }, (_, i) => `child line ${52 + i}`), `last line, from ${pid}`]);
    expect(logs.dropped).toBe(51);
    expect(logs.lines.every((l) => l.attempt === 1)).toBe(true);
    expect((await inserts(id)).length).toBeLessThanOrEqual(3);
  });

  describe('in the database', () => {
    const { worker: workerRow, claim, completeMany } = jobSql(() => sql);
    const log = async (job: { queue: string; id: string; attempt: number }, workerId: string, lines: string[], dropped = 0, keep = 100, on = sql) =>
      (
        await on.query(`SELECT stampeded_log_lines($1, $2, $3, $4, $5::timestamptz[], $6::text[], $7, $8) AS owned`, [
          job.queue,
          job.id,
          workerId,
          job.attempt,
          lines.map(() => new Date()),
          lines,
          dropped,
          keep,
        ])
      ).rows[0].owned as boolean;
    const stored = async (id: string) =>
      (await sql.query(`SELECT seq, attempt, message FROM stampeded_job_logs WHERE job_id = $1 ORDER BY seq`, [id])).rows.map(
        (r) => `${r.seq}/${r.attempt}: ${r.message}`,
      );

    it('writes only while the worker holds this attempt of the executing job; numbers past the dropped; keeps the newest', async () => {
      const [a, b] = [await workerRow(), await workerRow()];
      await sql.query(`INSERT INTO stampeded_jobs (queue, task) VALUES ('fence', 'x')`);
      const [job] = await claim('fence', a, 1);
      const row = async () => (await sql.query(`SELECT xmin::text, heartbeat_at FROM stampeded_jobs WHERE id = $1`, [job.id])).rows[0];
      const claimed = await row();
      expect(await log(job, a, ['one', 'two'], 0, 3)).toBe(true);
      expect(await log(job, b, ['from another worker'], 0, 3)).toBe(false);
      expect(await log({ ...job, attempt: job.attempt - 1 }, a, ['from an earlier attempt'], 0, 3)).toBe(false);
      expect(await stored(job.id)).toEqual(['1/1: one', '2/1: two']);
      // Two dropped in the worker before these: numbered after them. The
      // lines of the newest three numbers stay: a line older than one dropped
      // goes too, so what is kept is always the newest, with no gap.
      expect(await log(job, a, ['five', 'six'], 2, 3)).toBe(true);
      expect(await stored(job.id)).toEqual(['5/1: five', '6/1: six']);
      expect((await queue.getJob(job.id, { logs: true }))!.logs).toMatchObject({ lines: [{ message: 'five' }, { message: 'six' }], dropped: 4 });
      // The fence is a lock: the job's row is the version the claim wrote, not a touch.
      expect(await row()).toEqual(claimed);
      // Once completed, nothing more.
      expect(await completeMany(a, [job])).toEqual([job.id]);
      expect(await log(job, a, ['after the outcome'], 0, 3)).toBe(false);
      expect(await stored(job.id)).toEqual(['5/1: five', '6/1: six']);
    });

    it('writes nothing for a worker whose job was cancelled, or reaped and claimed again by another', async () => {
      const [a, b] = [await workerRow(), await workerRow()];
      await sql.query(`INSERT INTO stampeded_jobs (queue, task) SELECT 'reaped', 'x' FROM generate_series(1, 2)`);
      const [first, second] = await claim('reaped', a, 2);
      expect(await log(first, a, ['first'])).toBe(true);
      expect(await log(second, a, ['second'])).toBe(true);

      await sql.query(`SELECT * FROM stampeded_cancel($1)`, [first.id]);
      expect(await log(first, a, ['after the cancel'])).toBe(false);
      expect(await stored(first.id)).toEqual(['1/1: first']);

      await sql.query(`UPDATE stampeded_workers SET last_heartbeat = now() - interval '1 hour' WHERE id = $1`, [a]);
      expect((await sql.query(`SELECT id::text FROM stampeded_reap(interval '1 minute')`)).rows.map((r) => r.id)).toContain(second.id);
      await sql.query(`UPDATE stampeded_jobs SET scheduled_at = now() WHERE id = $1`, [second.id]);
      const [again] = await claim('reaped', b, 1);
      expect(again).toMatchObject({ id: second.id, attempt: 2 });
      expect(await log(second, a, ['from the reaped worker'])).toBe(false);
      expect(await log(again, b, ['from the new one'])).toBe(true);
      expect(await stored(second.id)).toEqual(['1/1: second', '2/2: from the new one']);
    });

    it('a write that meets a cancel under way waits for it, then writes nothing', async () => {
      const a = await workerRow();
      await sql.query(`INSERT INTO stampeded_jobs (queue, task) VALUES ('race', 'x')`);
      const [job] = await claim('race', a, 1);
      const canceller = await sqlClient(db.url);
      const writer = await sqlClient(db.url);
      try {
        await canceller.query('BEGIN');
        await canceller.query(`SELECT * FROM stampeded_cancel($1)`, [job.id]);
        const writerPid = (await writer.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
        const written = log(job, a, ['while the cancel commits'], 0, 100, writer);
        await waitFor(
          async () => (await sql.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`, [writerPid])).rowCount === 1,
          'the write to wait for the cancel',
        );
        await canceller.query('COMMIT');
        expect(await written).toBe(false);
        expect(await stored(job.id)).toEqual([]);
      } finally {
        await canceller.end();
        await writer.end();
      }
    });

    it("the pruner and the redrive of dead letters delete a job's lines with the job, and leave others'", async () => {
      const { rows } = await sql.query(
        `INSERT INTO stampeded_jobs (queue, task, state, attempt, finished_at, source_queue, source_id, source_attempts)
         VALUES ('pruned', 'x', 'completed', 1, now() - interval '2 hours', NULL, NULL, NULL),
                ('pruned', 'x', 'completed', 1, now(), NULL, NULL, NULL),
                ('pruned-dead', 'x', 'retryable', 1, NULL, 'pruned', uuidv7(), 1)
         RETURNING id::text`,
      );
      const [old, recent, copy] = rows.map((r) => r.id as string);
      await sql.query(
        `INSERT INTO stampeded_job_logs (job_id, seq, attempt, at, message)
         SELECT id, n, 1, now(), 'line ' || n FROM unnest($1::uuid[]) id, generate_series(1, 3) n`,
        [[old, recent, copy]],
      );
      expect((await sql.query(`SELECT stampeded_prune(interval '1 hour', 1000, interval '1 hour') AS n`)).rows[0].n).toBe(1);
      expect(await stored(old)).toEqual([]);
      expect(await stored(recent)).toHaveLength(3);
      expect(await queue.redrive('pruned-dead')).toMatchObject({ moved: 1 });
      expect(await stored(copy)).toEqual([]);
      expect(await stored(recent)).toHaveLength(3);
    });
  });
});

describe('job logs across processes', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let queue: QueueService;
  let sql: pg.Client;
  const fleet: WorkerProcess[] = [];

  beforeAll(async () => {
    db = await testDatabase();
    await migrate(db.url);
    sql = await sqlClient(db.url);
    app = await bootApp(db.url, { via: 'connection', stampeded: { migrations: 'none', worker: { enabled: false } } });
    queue = app.get(QueueService);
    // One job at a time each, none claimed ahead: a process whose job hangs claims nothing more.
    for (let i = 0; i < 2; i++) {
      fleet.push(
        WorkerProcess.start({ url: db.url, tasks: 'logs', stampeded: { migrations: 'none', worker: { concurrency: 1, prefetch: 0, pollIntervalMs: 100 } } }),
      );
    }
    await Promise.all(fleet.map((p) => p.ready()));
  });

  afterAll(async () => {
    await Promise.all(fleet.map((p) => p.stop()));
    await app?.close();
    await sql?.end();
    await db?.drop();
  });

  it("each job's lines are its own and in order, whichever process ran it", async () => {
    const ids = (await queue.enqueueMany(Array.from({ length: 8 }, () => ({ task: 'chatty', args: { lines: 150 }, options: { queue: 'logs' } })))).map(
      (j) => j.id,
    );
    const jobs = await Promise.all(ids.map((id) => queue.waitFor(id, { timeoutMs: 60_000 })));
    expect(new Set(jobs.map((j) => (j.result as { pid: number }).pid))).toEqual(new Set(fleet.map((p) => p.pid)));
    for (const id of ids) {
      const { logs } = (await queue.getJob(id, { logs: true }))!;
      expect(logs!.lines.map((l) => l.message)).toEqual(Array.from({ length: 100 }, (_, i) => `${id} line ${51 + i}`));
      expect(logs!.dropped).toBe(50);
    }
  });

  it('a process whose job was reaped and claimed by another writes none of its later lines', async () => {
    const { id } = await queue.enqueue('stale', {}, { queue: 'logs' });
    const first = await Promise.race(fleet.map((p) => p.waitFor('started', (e) => e.id === id).then(() => p)));
    const other = fleet.find((p) => p !== first)!;
    await waitFor(async () => (await queue.getJob(id, { logs: true }))!.logs!.lines.length === 1, 'the first attempt to write its first line');
    // The first process looks dead to the reaper: its job goes back, and the
    // other process, whose one slot is free, takes the second attempt.
    await sql.query(`UPDATE stampeded_workers SET last_heartbeat = now() - interval '1 hour' WHERE id = $1`, [first.workerId]);
    expect((await sql.query(`SELECT id::text FROM stampeded_reap(interval '1 minute')`)).rows.map((r) => r.id)).toContain(id);
    await other.waitFor('started', (e) => e.id === id && e.attempt === 2);
    await queue.waitFor(id, { timeoutMs: 60_000 });
    first.send({ go: id });
    await first.waitFor('logged', (e) => e.id === id);
    await first.waitFor('lost', (e) => e.id === id);
    const { logs } = (await queue.getJob(id, { logs: true }))!;
    expect(logs!.lines.map((l) => [l.attempt, l.message])).toEqual([
      [1, `attempt 1: started in ${first.pid}`],
      [2, `attempt 2: started in ${other.pid}`],
    ]);
  });
});
