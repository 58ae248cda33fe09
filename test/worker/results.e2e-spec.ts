import type { INestApplicationContext } from '@nestjs/common';
import { firstValueFrom, filter, take } from 'rxjs';
import type pg from 'pg';
import { QueueService, Task, type Job, type JobContext, type TaskHandler } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { jobSql } from '../support/job-sql.js';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';

// A handler's return value, stored with the job by the completion (migration
// 9): read back by another app, kept per job of a batch, bounded, and left
// out by a task that opts out.

/** A value no escaping may change on its way through the completion's array literal. */
const TRICKY = { s: 'say "hi", {braces}, NULL, \\ back\nslash', u: 'é😀', n: [1.5, -0, 1e21], nested: { deep: [null, true] } };

@Task('report', { queue: 'results' })
class Report implements TaskHandler<{ value?: unknown; none?: boolean }> {
  handle(args: { value?: unknown; none?: boolean }) {
    return args.none ? undefined : args.value;
  }
}

@Task('secret', { queue: 'results', storeResult: false })
class Secret implements TaskHandler {
  handle() {
    return { token: 'not for the jobs table' };
  }
}

/** Over 64 KB on the attempts listed in `bigOn`, small otherwise. */
@Task('sized', { queue: 'results', maxAttempts: 2, backoff: { baseMs: 10, maxMs: 10 } })
class Sized implements TaskHandler<{ bigOn: number[] }> {
  handle(args: { bigOn: number[] }, ctx: JobContext) {
    return args.bigOn.includes(ctx.attempt) ? { pdf: 'x'.repeat(70_000) } : { pdf: 'https://files/report.pdf' };
  }
}

@Task('nul', { queue: 'results', maxAttempts: 1 })
class Nul implements TaskHandler {
  handle() {
    return { name: 'a\u0000b' };
  }
}

describe('stored results', () => {
  let db: TestDatabase;
  let worker: INestApplicationContext;
  let api: INestApplicationContext;
  let queue: QueueService;
  let sql: pg.Client;

  const row = async (id: string) => (await sql.query(`SELECT * FROM stampeded_jobs WHERE id = $1`, [id])).rows[0];
  const finished = (id: string, state = 'completed') =>
    waitFor(async () => ((await queue.getJob(id))?.state === state ? queue.getJob(id) : null), `job ${id} to be ${state}`);

  beforeAll(async () => {
    db = await testDatabase();
    worker = await bootApp(db.url, {
      providers: [Report, Secret, Sized, Nul],
      stampeded: { worker: { concurrency: 20 } },
    });
    // The API process: it enqueues (with the tasks' options) and reads, and runs nothing.
    api = await bootApp(db.url, { via: 'connection', providers: [Report, Secret, Sized, Nul], stampeded: { worker: { enabled: false } } });
    queue = api.get(QueueService);
    sql = await sqlClient(db.url);
  });

  afterAll(async () => {
    await sql?.end();
    await api?.close();
    await worker?.close();
    await db?.drop();
  });

  it('stores what a handler returns, which another app reads with getJob()', async () => {
    const { id } = await queue.enqueue('report', { value: { url: 'https://files/a.pdf', pages: 3 } }, { queue: 'results' });
    const job: Job = await finished(id);
    expect(job.result).toEqual({ url: 'https://files/a.pdf', pages: 3 });
    expect((await row(id)).result).toEqual({ url: 'https://files/a.pdf', pages: 3 });
  });

  it('keeps each job its own result when a batch completes together, with and without results, escaping intact', async () => {
    const values: unknown[] = Array.from({ length: 60 }, (_, i) => (i % 3 === 0 ? undefined : i % 3 === 1 ? { i, ...TRICKY } : [`item ${i}`, i]));
    const ids = (
      await queue.enqueueMany(
        values.map((value, i) => ({ task: 'report', args: value === undefined ? { none: true, i } : { value, i }, options: { queue: 'results' } })),
      )
    ).map((r) => r.id);
    await waitFor(
      async () => (await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE id = ANY($1) AND state = 'completed'`, [ids])).rows[0].n === ids.length,
      'the batch to complete',
    );
    const stored = new Map((await sql.query(`SELECT id::text, result FROM stampeded_jobs WHERE id = ANY($1)`, [ids])).rows.map((r) => [r.id, r.result]));
    // What JSON.stringify makes of each value is what the database holds (-0 and 1e21 as JSON writes them).
    ids.forEach((id, i) => expect(stored.get(id)).toEqual(values[i] === undefined ? null : JSON.parse(JSON.stringify(values[i]))));
  });

  it('stores nothing for a handler that returns nothing or null, and any other JSON value as it is', async () => {
    const cases: [unknown, unknown][] = [
      [undefined, null],
      [null, null],
      ['done', 'done'],
      [0, 0],
      [false, false],
      [[], []],
    ];
    for (const [value, expected] of cases) {
      const { id } = await queue.enqueue('report', value === undefined ? { none: true } : { value }, { queue: 'results' });
      expect((await finished(id)).result).toEqual(expected);
      // A JSON null is not stored: the column is NULL, as for no result.
      if (expected === null) expect((await sql.query(`SELECT result IS NULL AS none FROM stampeded_jobs WHERE id = $1`, [id])).rows[0].none).toBe(true);
    }
  });

  it("stores nothing for a task with storeResult: false, whose result still reaches its process's completed event", async () => {
    const completed = firstValueFrom(
      worker.get(QueueService).events$.pipe(
        filter((e) => e.type === 'completed' && e.task === 'secret'),
        take(1),
      ),
    );
    const { id } = await queue.enqueue('secret', {}, { queue: 'results' });
    expect((await completed).result).toEqual({ token: 'not for the jobs table' });
    const job = await finished(id);
    expect(job.result).toBeNull();
    expect((await row(id)).result).toBeNull();
  });

  it('fails an attempt whose result is over 64 KB with a message saying so, retries it by its policy, and keeps the job', async () => {
    const [retried, doomed, ...small] = (
      await queue.enqueueMany([
        { task: 'sized', args: { bigOn: [1] }, options: { queue: 'results' } },
        { task: 'sized', args: { bigOn: [1, 2] }, options: { queue: 'results' } },
        ...Array.from({ length: 10 }, (_, i) => ({ task: 'report', args: { value: { small: i } }, options: { queue: 'results' } })),
      ])
    ).map((r) => r.id);
    const bytes = JSON.stringify({ pdf: 'x'.repeat(70_000) }).length;
    const message = new RegExp(
      `The result of task "sized" is ${bytes} bytes as JSON; the limit is 65536 bytes \\(64 KB\\)\\. Store large output elsewhere .* or set storeResult: false on the task`,
    );

    // Refused before the write: the jobs completing beside it lose nothing.
    for (const [i, id] of small.entries()) expect((await finished(id)).result).toEqual({ small: i });

    const second = await finished(retried);
    expect(second.attempt).toBe(2);
    expect(second.result).toEqual({ pdf: 'https://files/report.pdf' });
    expect(second.errors).toHaveLength(1);
    expect(second.errors[0]).toMatchObject({ attempt: 1, kind: 'raised' });
    expect(second.errors[0].message).toMatch(message);

    const discarded = await finished(doomed, 'discarded');
    expect(discarded).toMatchObject({ attempt: 2, failureKind: 'raised', result: null });
    expect(discarded.lastError).toMatch(/^ResultError: /);
    expect(discarded.lastError).toMatch(message);
    expect(discarded.errors.map((e) => e.kind)).toEqual(['raised', 'raised']);
  });

  it('fails an attempt whose result PostgreSQL could not store, naming where in it', async () => {
    const { id } = await queue.enqueue('nul', {}, { queue: 'results' });
    const job = await finished(id, 'discarded');
    expect(job.lastError).toContain('The result of task "nul" cannot be stored: result.name contains a NUL character');
  });

  it('keeps no result of a job removed on completion: the job is gone', async () => {
    const { id } = await queue.enqueue('report', { value: { kept: false } }, { queue: 'results', removeOnComplete: true });
    await waitFor(async () => (await sql.query(`SELECT 1 FROM stampeded_jobs WHERE id = $1`, [id])).rowCount === 0, 'the job to be removed');
    expect(await queue.getJob(id)).toBeNull();
  });

  describe('in the database', () => {
    const { worker: workerRow, claim, completeMany } = jobSql(() => sql);

    it('stores a result only while the completing worker holds the attempt', async () => {
      const [a, b] = [await workerRow(), await workerRow()];
      const ids = (await sql.query(`INSERT INTO stampeded_jobs (queue, task) SELECT 'fenced', 'x' FROM generate_series(1, 2) RETURNING id::text`)).rows.map(
        (r) => r.id,
      );
      const claimed = await claim('fenced', a, 2);
      // b never held them: nothing is completed, nothing stored.
      expect(await completeMany(b, claimed, undefined, ['{"by":"b"}', '{"by":"b"}'])).toEqual([]);
      expect(await completeMany(a, claimed, undefined, ['{"by":"a"}', null])).toHaveLength(2);
      const results = new Map((await sql.query(`SELECT id::text, result FROM stampeded_jobs WHERE id = ANY($1)`, [ids])).rows.map((r) => [r.id, r.result]));
      expect(results.get(claimed[0].id)).toEqual({ by: 'a' });
      expect(results.get(claimed[1].id)).toBeNull();
    });

    it("refuses a result or a progress past the schema's backstop, whoever writes it", async () => {
      const { rows } = await sql.query(`INSERT INTO stampeded_jobs (queue, task) VALUES ('backstop', 'x') RETURNING id`);
      const big = (bytes: number) => `'{"x": "' || repeat('x', ${bytes}) || '"}'`;
      await expect(sql.query(`UPDATE stampeded_jobs SET result = (${big(1_048_576)})::jsonb WHERE id = $1`, [rows[0].id])).rejects.toMatchObject({
        code: '23514',
        constraint: 'stampeded_jobs_result_size',
      });
      await expect(sql.query(`UPDATE stampeded_jobs SET progress = (${big(65_536)})::jsonb WHERE id = $1`, [rows[0].id])).rejects.toMatchObject({
        code: '23514',
        constraint: 'stampeded_jobs_progress_size',
      });
    });
  });
});
