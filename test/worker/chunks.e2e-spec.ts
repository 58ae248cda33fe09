import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { JobEvents, QueueService, Task, type ChunkContext, type ChunkJob, type ChunkTaskHandler, type JobEvent, type LocalJobEvent } from '@stampeded/nestjs';
import { WorkerOrchestrator } from '@stampeded/nestjs/internal-runtime';
import { drain, type TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';
import { WorkerProcess } from '../support/worker-process.js';

// Chunked tasks (@Task(name, { chunk })): one handleChunk() call per chunk
// of jobs, each job keeping its own outcome, attempts, result and events.
// What the calls were is recorded here as the handlers see them; what
// happened to each job is read from the database.

interface Call {
  task: string;
  ids: string[];
  args: Record<string, unknown>[];
}
const calls: Call[] = [];
const record = (task: string, jobs: ChunkJob<any>[]) => calls.push({ task, ids: jobs.map((j) => j.id), args: jobs.map((j) => j.args) });
const callsOf = (task: string) => calls.filter((c) => c.task === task);

@Task('chunk:full', { queue: 'chunk-full', chunk: { size: 10, waitMs: 600_000 } })
class Full implements ChunkTaskHandler<{ n: number }> {
  handleChunk(jobs: ChunkJob<{ n: number }>[]) {
    record('chunk:full', jobs);
  }
}

@Task('chunk:partial', { queue: 'chunk-partial', chunk: { size: 100, waitMs: 3000 } })
class Partial implements ChunkTaskHandler<{ n: number }> {
  handleChunk(jobs: ChunkJob<{ n: number }>[]) {
    record('chunk:partial', jobs);
  }
}

type Kind = 'ok' | 'fail' | 'fail-once' | 'discard' | 'cancel' | 'result';

@Task('chunk:outcomes', { queue: 'chunk-outcomes', maxAttempts: 2, backoff: { baseMs: 10, maxMs: 10 }, chunk: { size: 20, waitMs: 100 } })
class Outcomes implements ChunkTaskHandler<{ kind: Kind }, { echoed: string }> {
  handleChunk(jobs: ChunkJob<{ kind: Kind }>[], ctx: ChunkContext<{ echoed: string }>) {
    record('chunk:outcomes', jobs);
    for (const job of jobs) {
      const { kind } = job.args;
      if (kind === 'fail') ctx.fail(job, new Error(`row of job ${job.id} refused`));
      if (kind === 'fail-once' && job.attempt === 1) ctx.fail(job, new Error('refused the first time'));
      if (kind === 'discard') ctx.discard(job, new Error('not worth a retry'));
      if (kind === 'cancel') ctx.cancel(job);
      if (kind === 'result') ctx.complete(job, { echoed: job.id });
    }
  }
}

@Task('chunk:throws', { queue: 'chunk-throws', maxAttempts: 1, chunk: { size: 10, waitMs: 200 } })
class Throws implements ChunkTaskHandler<{ keep?: boolean }> {
  handleChunk(jobs: ChunkJob<{ keep?: boolean }>[], ctx: ChunkContext) {
    record('chunk:throws', jobs);
    const keep = jobs.find((j) => j.args.keep);
    if (keep) ctx.complete(keep, 'kept');
    throw new Error('the bulk API is down');
  }
}

@Task('chunk:cancel', { queue: 'chunk-cancel', chunk: { size: 3, waitMs: 200 } })
class CancelledMidChunk implements ChunkTaskHandler<{ cancelMe?: boolean }> {
  constructor(private readonly queue: QueueService) {}

  async handleChunk(jobs: ChunkJob<{ cancelMe?: boolean }>[]) {
    record('chunk:cancel', jobs);
    // Cancelled by someone else while its chunk runs; the handler goes on and returns as if all went well.
    for (const job of jobs) if (job.args.cancelMe) await this.queue.cancel(job.id);
  }
}

@Task('chunk:double', { queue: 'chunk-double', chunk: { size: 50, waitMs: 200 } })
class Double implements ChunkTaskHandler<{ n: number }, { doubled: number }> {
  handleChunk(jobs: ChunkJob<{ n: number }>[], ctx: ChunkContext<{ doubled: number }>) {
    for (const job of jobs) ctx.complete(job, { doubled: job.args.n * 2 });
  }
}

/** Whether the chunk's signal and each job's fired, per call. */
const slowSignals: { chunk: boolean; jobs: boolean[] }[] = [];

@Task('chunk:slow', { queue: 'chunk-slow', expireSeconds: 1, maxAttempts: 1, chunk: { size: 3, waitMs: 200 } })
class Slow implements ChunkTaskHandler {
  async handleChunk(jobs: ChunkJob[], ctx: ChunkContext) {
    let timer: NodeJS.Timeout | undefined;
    // Never touches: it waits for its deadline (bounded, so that a chunk whose signal never fires cannot hold the file open).
    await new Promise<void>((resolve) => {
      timer = setTimeout(resolve, 30_000);
      ctx.signal.addEventListener('abort', () => resolve(), { once: true });
    });
    clearTimeout(timer);
    slowSignals.push({ chunk: ctx.signal.aborted, jobs: jobs.map((j) => j.signal.aborted) });
  }
}

@Task('chunk:keyed', { queue: 'chunk-keyed', chunk: { size: 10, waitMs: 50 } })
class Keyed implements ChunkTaskHandler<{ key: string; n: number }> {
  handleChunk(jobs: ChunkJob<{ key: string; n: number }>[]) {
    record('chunk:keyed', jobs);
  }
}

@Task('chunk:held', { queue: 'chunk-held', chunk: { size: 100, waitMs: 600_000 } })
class Held implements ChunkTaskHandler {
  handleChunk(jobs: ChunkJob[]) {
    record('chunk:held', jobs);
  }
}

@Task('chunk:drained', { queue: 'chunk-drained', chunk: { size: 10, waitMs: 600_000 } })
class Drained implements ChunkTaskHandler {
  handleChunk(jobs: ChunkJob[]) {
    record('chunk:drained', jobs);
  }
}

const TASKS = [Full, Partial, Outcomes, Throws, CancelledMidChunk, Double, Slow, Keyed];

describe('chunked tasks', () => {
  let db: TestDatabase;
  let sql: pg.Client;
  let worker: INestApplicationContext;
  let api: INestApplicationContext;
  let queue: QueueService;
  const events: LocalJobEvent[] = [];

  const rows = async (ids: string[]) =>
    new Map(
      (
        await sql.query(
          `SELECT id::text, state, attempt, failure_kind, last_error, result, claimed_by, jsonb_array_length(errors) AS errors FROM stampeded_jobs WHERE id = ANY($1::uuid[])`,
          [ids],
        )
      ).rows.map((r) => [r.id as string, r]),
    );
  const finished = (ids: string[]) =>
    waitFor(
      async () =>
        (
          await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE id = ANY($1::uuid[]) AND state IN ('completed', 'discarded', 'cancelled')`, [
            ids,
          ])
        ).rows[0].n === ids.length,
      `${ids.length} job(s) to finish`,
      30_000,
    );
  const enqueue = async (task: string, queueName: string, args: Record<string, unknown>[], options: { orderingKey?: (i: number) => string } = {}) =>
    (
      await queue.enqueueMany(
        args.map((a, i) => ({ task, args: a, options: { queue: queueName, ...(options.orderingKey ? { orderingKey: options.orderingKey(i) } : {}) } })),
      )
    ).map((r) => r.id);

  beforeAll(async () => {
    db = await testDatabase();
    worker = await bootApp(db.url, { providers: TASKS, stampeded: { worker: { concurrency: 4 } } });
    worker.get(JobEvents).local$.subscribe((e) => events.push(e));
    // The API process: it enqueues (with the tasks' options) and reads, and runs nothing.
    api = await bootApp(db.url, { via: 'connection', providers: TASKS, stampeded: { worker: { enabled: false } } });
    queue = api.get(QueueService);
    sql = await sqlClient(db.url);
  });

  afterAll(async () => {
    await sql?.end();
    await api?.close();
    await worker?.close();
    await db?.drop();
  });

  it('hands a chunk of jobs to one handleChunk() call, up to its size', async () => {
    const ids = await enqueue(
      'chunk:full',
      'chunk-full',
      Array.from({ length: 20 }, (_, n) => ({ n })),
    );
    await finished(ids);
    // The chunk's wait is ten minutes: only full chunks ran.
    const full = callsOf('chunk:full');
    expect(full.map((c) => c.ids.length)).toEqual([10, 10]);
    expect(full.flatMap((c) => c.ids).sort()).toEqual([...ids].sort());
    expect([...(await rows(ids)).values()].every((r) => r.state === 'completed' && r.attempt === 1)).toBe(true);
  });

  it('runs a chunk with fewer jobs than its size once its wait has passed since the first arrived', async () => {
    const ids: string[] = [];
    // Three enqueues, one after another: the chunk the first opened takes the others.
    for (let n = 0; n < 3; n++) ids.push(...(await enqueue('chunk:partial', 'chunk-partial', [{ n }])));
    await finished(ids);
    const partial = callsOf('chunk:partial');
    expect(partial).toHaveLength(1);
    expect([...partial[0].ids].sort()).toEqual([...ids].sort());
  });

  it("keeps each job's own outcome: a failed job is retried and discarded by its own attempts, the others complete", async () => {
    const kinds: Kind[] = ['ok', 'fail', 'fail-once', 'discard', 'cancel', 'result', 'ok'];
    const ids = await enqueue(
      'chunk:outcomes',
      'chunk-outcomes',
      kinds.map((kind) => ({ kind })),
    );
    await finished(ids);
    const byKind = new Map<Kind, { state: string; attempt: number; failure_kind: string | null; errors: number; result: unknown; last_error: string | null }>();
    const stored = await rows(ids);
    kinds.forEach((kind, i) => byKind.set(kind, stored.get(ids[i])));
    expect(stored.get(ids[0])).toMatchObject({ state: 'completed', attempt: 1, errors: 0 });
    expect(stored.get(ids[6])).toMatchObject({ state: 'completed', attempt: 1, errors: 0 });
    // Refused on both of its attempts: discarded when they ran out, each failure in its history.
    expect(byKind.get('fail')).toMatchObject({
      state: 'discarded',
      attempt: 2,
      failure_kind: 'raised',
      errors: 2,
      last_error: expect.stringContaining(`row of job ${ids[1]} refused`),
    });
    expect(byKind.get('fail-once')).toMatchObject({ state: 'completed', attempt: 2, errors: 1 });
    expect(byKind.get('discard')).toMatchObject({
      state: 'discarded',
      attempt: 1,
      failure_kind: 'unrecoverable',
      last_error: expect.stringContaining('not worth a retry'),
    });
    expect(byKind.get('cancel')).toMatchObject({ state: 'cancelled', attempt: 1, failure_kind: 'cancelled' });
    expect(byKind.get('result')).toMatchObject({ state: 'completed', result: { echoed: ids[5] } });
    // The retried jobs came back in a chunk of their own: only they were run twice.
    const runs = callsOf('chunk:outcomes').flatMap((c) => c.ids);
    expect(runs.filter((id) => id === ids[1] || id === ids[2])).toHaveLength(4);
    expect(runs).toHaveLength(kinds.length + 2);
  });

  it("tells the fleet each job's own outcome, from the statements that record them", async () => {
    const heard: JobEvent[] = [];
    const subscription = queue.events$.subscribe((e) => heard.push(e));
    const fleetTypes = (id: string) => heard.filter((e) => e.jobId === id && e.origin === 'fleet').map((e) => e.type);
    try {
      // Workers notify only while someone listens, and learn that it does from its announcement or their heartbeat.
      await waitFor(async () => {
        const [id] = await enqueue('chunk:double', 'chunk-double', [{ n: 1 }]);
        await waitFor(() => fleetTypes(id).length, 'a probe', 2000).catch(() => undefined);
        return fleetTypes(id).length;
      }, 'the worker, notifying');
      const kinds: Kind[] = ['ok', 'fail', 'discard', 'cancel'];
      const ids = await enqueue(
        'chunk:outcomes',
        'chunk-outcomes',
        kinds.map((kind) => ({ kind })),
      );
      await finished(ids);
      await waitFor(() => fleetTypes(ids[1]).length === 4 && ids.every((id) => fleetTypes(id).length), 'the outcomes, heard');
      expect(fleetTypes(ids[0])).toEqual(['completed']);
      expect(fleetTypes(ids[1])).toEqual(['failed', 'retrying', 'failed', 'discarded']);
      expect(fleetTypes(ids[2])).toEqual(['failed', 'discarded']);
      expect(fleetTypes(ids[3])).toEqual(['cancelled']);
      const workerId = worker.get(WorkerOrchestrator).workerId;
      expect(heard.find((e) => e.jobId === ids[2] && e.type === 'discarded')).toEqual({
        origin: 'fleet',
        type: 'discarded',
        jobId: ids[2],
        queue: 'chunk-outcomes',
        task: 'chunk:outcomes',
        attempt: 1,
        workerId,
        failureKind: 'unrecoverable',
        deadLettered: false,
      });
      expect(heard.find((e) => e.jobId === ids[3])).toMatchObject({ origin: 'fleet', type: 'cancelled', attempt: 1, workerId });
    } finally {
      subscription.unsubscribe();
    }
  });

  it('fails every job the handler gave no outcome when it throws, each by its own attempts, and keeps the outcomes it gave', async () => {
    const ids = await enqueue('chunk:throws', 'chunk-throws', [{ keep: true }, {}, {}]);
    await finished(ids);
    const stored = await rows(ids);
    expect(stored.get(ids[0])).toMatchObject({ state: 'completed', result: 'kept' });
    for (const id of ids.slice(1))
      expect(stored.get(id)).toMatchObject({
        state: 'discarded',
        attempt: 1,
        failure_kind: 'raised',
        last_error: expect.stringContaining('the bulk API is down'),
      });
  });

  it('leaves a job cancelled while its chunk runs cancelled, and completes the others', async () => {
    const ids = await enqueue('chunk:cancel', 'chunk-cancel', [{}, { cancelMe: true }, {}]);
    await finished(ids);
    const stored = await rows(ids);
    expect(stored.get(ids[1])).toMatchObject({ state: 'cancelled', claimed_by: null });
    expect(stored.get(ids[0])).toMatchObject({ state: 'completed' });
    expect(stored.get(ids[2])).toMatchObject({ state: 'completed' });
    // It ran in the chunk, and no completion was recorded for it, here or in the database.
    expect(callsOf('chunk:cancel').flatMap((c) => c.ids)).toContain(ids[1]);
    await waitFor(() => events.some((e) => e.jobId === ids[0] && e.type === 'completed'), 'the completed events');
    expect(events.filter((e) => e.jobId === ids[1]).map((e) => e.type)).not.toContain('completed');
  });

  it('stores one result per job, which waitFor() reads, with an active and a completed event for each', async () => {
    const ids = await enqueue(
      'chunk:double',
      'chunk-double',
      Array.from({ length: 30 }, (_, n) => ({ n })),
    );
    const jobs = await Promise.all(ids.map((id) => queue.waitFor(id, { timeoutMs: 30_000 })));
    jobs.forEach((job, n) => expect(job).toMatchObject({ state: 'completed', result: { doubled: n * 2 } }));
    await waitFor(() => ids.every((id) => events.some((e) => e.jobId === id && e.type === 'completed')), 'the completed events');
    for (const [n, id] of ids.entries()) {
      const mine = events.filter((e) => e.jobId === id);
      expect(mine.filter((e) => e.type === 'active')).toHaveLength(1);
      expect(mine.filter((e) => e.type === 'completed').map((e) => e.result)).toEqual([{ doubled: n * 2 }]);
    }
  });

  it("times a chunk out at its jobs' deadline: the chunk's signal and each job's fire, and each job fails timed_out", async () => {
    const ids = await enqueue('chunk:slow', 'chunk-slow', [{}, {}, {}]);
    await finished(ids);
    for (const row of (await rows(ids)).values()) expect(row).toMatchObject({ state: 'discarded', failure_kind: 'timed_out' });
    await waitFor(() => slowSignals.length > 0, 'the slow handler to return');
    expect(slowSignals.every((s) => s.chunk && s.jobs.every(Boolean))).toBe(true);
  });

  it("keeps per-key order: a chunk holds one job of a key at a time, and a key's jobs run in their order", async () => {
    const args = [0, 1, 2].flatMap((k) => [1, 2, 3, 4].map((n) => ({ key: `k${k}`, n })));
    const ids = await enqueue('chunk:keyed', 'chunk-keyed', args, { orderingKey: (i) => args[i].key });
    await finished(ids);
    const keyed = callsOf('chunk:keyed');
    for (const call of keyed) {
      const keys = call.args.map((a) => a.key);
      expect(new Set(keys).size).toBe(keys.length);
    }
    for (const key of ['k0', 'k1', 'k2']) {
      expect(keyed.flatMap((c) => c.args.filter((a) => a.key === key).map((a) => a.n))).toEqual([1, 2, 3, 4]);
    }
  });

  it("gives back a filling chunk's jobs at shutdown, unstarted and with their attempts whole", async () => {
    const holder = await bootApp(db.url, { providers: [Held], stampeded: { worker: { concurrency: 2, queues: ['chunk-held'] } } });
    const ids = await enqueue('chunk:held', 'chunk-held', [{}, {}]);
    await waitFor(async () => [...(await rows(ids)).values()].every((r) => r.state === 'executing'), 'the jobs to be claimed into their chunk');
    await holder.close();
    for (const row of (await rows(ids)).values()) expect(row).toMatchObject({ state: 'available', attempt: 0, claimed_by: null });
    expect(callsOf('chunk:held')).toHaveLength(0);
  });

  it('drain() runs each job of a chunked task as a chunk of its own', async () => {
    const drainer = await bootApp(db.url, { providers: [Drained], stampeded: { worker: { enabled: false } } });
    const ids = await enqueue('chunk:drained', 'chunk-drained', [{}, {}]);
    const result = await drain(drainer, { queue: 'chunk-drained' });
    await drainer.close();
    expect(result.completed).toBe(2);
    expect(callsOf('chunk:drained').map((c) => c.ids)).toEqual(ids.map((id) => [id]));
  });

  describe('across worker processes', () => {
    const fleet: WorkerProcess[] = [];

    beforeAll(async () => {
      await sql.query(`CREATE TABLE chunk_rows (job_id uuid NOT NULL, attempt int, call_id uuid, pid int, calls_jobs int)`);
      for (let i = 0; i < 2; i++) {
        fleet.push(
          WorkerProcess.start({
            url: db.url,
            tasks: 'chunks',
            chunkSize: 50,
            stampeded: { worker: { concurrency: 4, pollIntervalMs: 100, queues: ['chunked'] }, maintenance: { enabled: false } },
          }),
        );
      }
      await Promise.all(fleet.map((p) => p.ready()));
    }, 120_000);

    afterAll(async () => {
      await Promise.all(fleet.splice(0).map((p) => p.stop()));
    });

    it('completes every job once, its row written by one INSERT per chunk', async () => {
      const ids: string[] = [];
      for (let batch = 0; batch < 4; batch++)
        ids.push(
          ...(await enqueue(
            'sync-rows',
            'chunked',
            Array.from({ length: 250 }, (_, n) => ({ n })),
          )),
        );
      await finished(ids).catch((err: Error) => {
        throw new Error(`${err.message}\n${fleet.map((p) => p.output).join('\n')}`);
      });
      const { rows: written } = await sql.query(
        `SELECT count(*)::int AS n, count(DISTINCT job_id)::int AS jobs, count(DISTINCT call_id)::int AS calls, max(calls_jobs)::int AS largest FROM chunk_rows`,
      );
      expect(written[0]).toMatchObject({ n: ids.length, jobs: ids.length });
      expect(written[0].largest).toBeLessThanOrEqual(50);
      // Grouped, not one call per job.
      expect(written[0].calls).toBeLessThan(ids.length / 5);
      const states = await sql.query(`SELECT state, count(*)::int AS n FROM stampeded_jobs WHERE id = ANY($1::uuid[]) GROUP BY state`, [ids]);
      expect(states.rows).toEqual([{ state: 'completed', n: ids.length }]);
    });
  });
});
