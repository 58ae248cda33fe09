import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { InvalidJobError, QueueService, Task, migrate, type TaskHandler } from '@stampeded/nestjs';
import { expectEnqueued, type TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase } from '../support/test-app.js';
import { WorkerProcess } from '../support/worker-process.js';

// An app split in two: the worker process provides the tasks
// (test/fixtures/worker-process/reports.tasks.mjs); the API app below imports
// their classes, as it would from a shared library, without providing them,
// and enqueues by class. The classes carry their queues and job options: the
// jobs must land where the worker process claims, with those options.

@Task('render-report', { queue: 'reports', priority: 3, maxAttempts: 7, expireSeconds: 120, backoff: { baseMs: 40_000 }, removeOnComplete: false })
class RenderReport implements TaskHandler<{ pages: number }, { pages: number; queue: string }> {
  handle(): never {
    throw new Error('runs in the worker process');
  }
}

@Task('send-receipt', { queue: 'mail', maxDeferrals: 9, deadLetterQueue: 'mail-dead' })
class SendReceipt implements TaskHandler<{ to: string }, { to: string; queue: string }> {
  handle(): never {
    throw new Error('runs in the worker process');
  }
}

@Task('misdeclared', { maxAttempts: 0 })
class Misdeclared implements TaskHandler {
  handle() {}
}

describe('enqueue by class, from a process that does not provide the class', () => {
  const handle = {} as { db: TestDatabase; sql: pg.Client };
  let worker: WorkerProcess;
  let api: INestApplicationContext;
  let queue: QueueService;
  const row = async (id: string) => (await handle.sql.query(`SELECT * FROM stampeded_jobs WHERE id = $1`, [id])).rows[0];

  beforeAll(async () => {
    handle.db = await testDatabase();
    await migrate(handle.db.url);
    handle.sql = await sqlClient(handle.db.url);
    worker = WorkerProcess.start({ url: handle.db.url, tasks: 'reports', stampeded: { worker: { pollIntervalMs: 200 } } });
    api = await bootApp(handle.db.url, { via: 'connection', stampeded: { worker: { enabled: false } } });
    queue = api.get(QueueService);
    await worker.ready();
  });

  afterAll(async () => {
    await api?.close();
    await worker?.stop();
    await handle.sql?.end();
    await handle.db?.drop();
  });

  it("takes the queue and job options from the class's @Task(), and the worker process runs the job", async () => {
    const { id } = await queue.enqueue(RenderReport, { pages: 4 });
    expect(await row(id)).toMatchObject({
      queue: 'reports',
      task: 'render-report',
      priority: 3,
      max_attempts: 7,
      expire_seconds: 120,
      backoff_base_wide_ms: 40_000,
      remove_on_complete: false,
    });

    const done = await queue.waitFor(RenderReport, id, { timeoutMs: 30_000 });
    expect(done).toMatchObject({ state: 'completed', queue: 'reports', result: { pages: 4, queue: 'reports' } });
    expect(await row(id)).toMatchObject({ queue: 'reports', state: 'completed' });
  });

  it('enqueueMany() and the enqueue options still win over the class', async () => {
    const [report, receipt, moved] = await queue.enqueueMany([
      { task: RenderReport, args: { pages: 1 } },
      { task: SendReceipt, args: { to: 'a@b.c' } },
      { task: SendReceipt, args: { to: 'd@e.f' }, options: { queue: 'mail-slow', maxDeferrals: 2 } },
    ]);
    expect(await row(report.id)).toMatchObject({ queue: 'reports', max_attempts: 7 });
    expect(await row(receipt.id)).toMatchObject({ queue: 'mail', max_deferrals: 9, dead_letter_queue: 'mail-dead' });
    expect(await row(moved.id)).toMatchObject({ queue: 'mail-slow', max_deferrals: 2, dead_letter_queue: 'mail-dead' });
    await expect(queue.waitFor(SendReceipt, receipt.id, { timeoutMs: 30_000 })).resolves.toMatchObject({ state: 'completed', result: { queue: 'mail' } });
    await queue.cancel(moved.id);
  });

  it("places a workflow's and a batch's jobs by their classes", async () => {
    const flow = await queue.enqueueWorkflow({
      name: 'report-then-receipt',
      jobs: [
        { name: 'render', task: RenderReport, args: { pages: 2 } },
        { name: 'receipt', task: SendReceipt, args: { to: 'a@b.c' }, dependsOn: [{ name: 'render' }] },
      ],
    });
    const batch = await queue.enqueueBatch({
      name: 'reports',
      jobs: [{ name: 'one', task: RenderReport, args: { pages: 1 } }],
      callback: { task: SendReceipt },
    });
    expect(await row(flow.jobs.render)).toMatchObject({ queue: 'reports', max_attempts: 7 });
    expect(await row(flow.jobs.receipt)).toMatchObject({ queue: 'mail', max_deferrals: 9 });
    expect(await row(batch.jobs.one)).toMatchObject({ queue: 'reports' });
    expect(await row(batch.jobs.callback)).toMatchObject({ queue: 'mail' });
    await expect(queue.waitFor(SendReceipt, flow.jobs.receipt, { timeoutMs: 30_000 })).resolves.toMatchObject({ state: 'completed' });
    await expect(queue.waitFor(SendReceipt, batch.jobs.callback, { timeoutMs: 30_000 })).resolves.toMatchObject({ state: 'completed' });
  });

  it('finds the jobs of a class with expectEnqueued()', async () => {
    const { id } = await queue.enqueue(SendReceipt, { to: 'later@b.c' }, { runAt: new Date(Date.now() + 3_600_000) });
    const found = await expectEnqueued(api, { task: SendReceipt, args: { to: 'later@b.c' }, states: ['available'], count: 1 });
    expect(found.map((job) => job.id)).toEqual([id]);
    await queue.cancel(id);
  });

  it('refuses a class whose @Task() options are invalid, naming the class, and writes nothing', async () => {
    const before = (await handle.sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs`)).rows[0].n;
    await expect(queue.enqueue(Misdeclared, {})).rejects.toThrow(InvalidJobError);
    await expect(queue.enqueue(Misdeclared, {})).rejects.toThrow(/@Task\('misdeclared'\) on Misdeclared: maxAttempts must be an integer from 1/);
    expect((await handle.sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs`)).rows[0].n).toBe(before);
  });
});
