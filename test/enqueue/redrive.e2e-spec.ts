import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { InvalidJobError, QueueService, Task, type TaskHandler } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';

const upstream = { failing: true };

@Task('charge', { queue: 'billing', maxAttempts: 1, deadLetterQueue: 'billing-dead' })
class Charge implements TaskHandler<{ card: string }> {
  async handle(args: { card: string }) {
    if (upstream.failing) throw new Error(`card ${args.card} declined by issuer`);
  }
}

@Task('refund', { queue: 'billing', maxAttempts: 1, deadLetterQueue: 'billing-dead' })
class Refund implements TaskHandler<{ order: number }> {
  async handle() {
    if (upstream.failing) throw new Error('refund service unavailable');
  }
}

/** Declares a dead-letter queue that nothing ever fails into. */
@Task('audit', { queue: 'audit', deadLetterQueue: 'audit-dead' })
class Audit implements TaskHandler<Record<string, never>> {
  async handle() {}
}

@Task('import-row', { queue: 'imports', maxAttempts: 1, deadLetterQueue: 'imports-dead' })
class ImportRow implements TaskHandler<{ n: number }> {
  async handle() {
    if (upstream.failing) throw new Error('feed timed out');
  }
}

// QueueService.redrive() on dead letters made the real way: handlers that
// throw, with a dead-letter queue set, so that stampeded_fail writes each copy.
describe('QueueService.redrive()', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let queue: QueueService;
  let sql: pg.Client;

  const count = async (where: string, values: unknown[] = []) =>
    Number((await sql.query(`SELECT count(*) AS n FROM stampeded_jobs WHERE ${where}`, values)).rows[0].n);

  /** Every job row and every counter, to show that a refused call wrote nothing. */
  const snapshot = async () => ({
    jobs: (await sql.query(`SELECT queue, id, state FROM stampeded_jobs ORDER BY queue, id`)).rows,
    counts: (await sql.query(`SELECT queue, state, n FROM stampeded_queue_counts_total ORDER BY queue, state`)).rows,
  });

  beforeAll(async () => {
    db = await testDatabase();
    app = await bootApp(db.url, {
      providers: [Charge, Refund, ImportRow, Audit],
      stampeded: { worker: { pollIntervalMs: 50, queues: ['billing', 'imports'], concurrency: 20 } },
    });
    queue = app.get(QueueService);
    sql = await sqlClient(db.url);

    await queue.enqueueMany([
      { task: 'charge', args: { card: '4242' } },
      { task: 'charge', args: { card: '1111' } },
      { task: 'charge', args: { card: '5555' } },
      { task: 'refund', args: { order: 1 } },
      { task: 'refund', args: { order: 2 } },
    ]);
    await queue.enqueueMany(Array.from({ length: 120 }, (_, n) => ({ task: 'import-row', args: { n } })));
    await waitFor(async () => (await count(`queue = 'billing-dead'`)) === 5 && (await count(`queue = 'imports-dead'`)) === 120, 'every job dead-lettered');
  });

  afterAll(async () => {
    await sql?.end();
    await app?.close();
    await db?.drop();
  });

  it('refuses bad input with a message that says what to do, before writing anything', async () => {
    const before = await snapshot();
    const refusals: [string, unknown, RegExp][] = [
      ['billing-deadd', {}, /no job has ever been in queue "billing-deadd".*Queues holding dead-letter copies now: billing-dead, imports-dead/],
      ['billing dead', {}, /deadLetterQueue must be 1 to \d+ characters/],
      ['billing-dead', { fingerprint: 'zz' }, /fingerprint must be 64 hex characters, as the dashboard's errors page shows it/],
      ['billing-dead', { fingerprint: 'ab'.repeat(33) }, /fingerprint must be 64 hex characters/],
      ['billing-dead', { task: '' }, /task must be a non-empty string/],
      ['billing-dead', { task: 'bad\u0000name' }, /task contains a NUL character/],
      ['billing-dead', { batchSize: 0 }, /batchSize must be an integer from 1 to 10000, got 0/],
      ['billing-dead', { dryRun: 'yes' }, /dryRun must be true or false/],
      ['billing-dead', { queue: 'billing' }, /unknown option "queue"\. Allowed: task, fingerprint, dryRun, batchSize, onProgress/],
    ];
    for (const [dlq, options, message] of refusals) {
      const error = await queue.redrive(dlq, options as never).then(
        () => null,
        (err: unknown) => err,
      );
      expect(error).toBeInstanceOf(InvalidJobError);
      expect((error as Error).message).toMatch(message);
    }
    expect(await snapshot()).toEqual(before);
  });

  it('answers an empty result for a dead-letter queue this app declares but nothing has failed into', async () => {
    // Not an error: a declared queue that is empty is not misspelt.
    await expect(queue.redrive('audit-dead')).resolves.toEqual({ queue: 'audit-dead', dryRun: false, moved: 0, bySource: [] });
    await expect(queue.redrive('audit-dead', { dryRun: true })).resolves.toEqual({ queue: 'audit-dead', dryRun: true, moved: 0, bySource: [] });
    await expect(queue.redrive('billing-dead', { task: 'no-such-task' })).resolves.toEqual({ queue: 'billing-dead', dryRun: false, moved: 0, bySource: [] });
  });

  it('previews with a dry run, moving nothing, and then moves exactly what it previewed', async () => {
    const before = await snapshot();
    const all = await queue.redrive('billing-dead', { dryRun: true });
    expect(all).toEqual({
      queue: 'billing-dead',
      dryRun: true,
      moved: 5,
      bySource: [
        { sourceQueue: 'billing', task: 'charge', jobs: 3 },
        { sourceQueue: 'billing', task: 'refund', jobs: 2 },
      ],
    });
    expect(await snapshot()).toEqual(before);

    // The three declined cards share one fingerprint: the numbers are normalised out.
    const { rows: fingerprints } = await sql.query(
      `SELECT DISTINCT encode(error_fingerprint, 'hex') AS hex FROM stampeded_jobs WHERE queue = 'billing' AND task = 'charge'`,
    );
    expect(fingerprints).toHaveLength(1);
    const fingerprint = fingerprints[0].hex as string;
    const dry = await queue.redrive('billing-dead', { fingerprint, dryRun: true });
    expect(dry).toEqual({ queue: 'billing-dead', dryRun: true, moved: 3, bySource: [{ sourceQueue: 'billing', task: 'charge', jobs: 3 }] });
    expect(await snapshot()).toEqual(before);

    upstream.failing = false;
    const progress: number[] = [];
    const moved = await queue.redrive('billing-dead', { fingerprint: fingerprint.toUpperCase(), batchSize: 2, onProgress: (n) => progress.push(n) });
    expect(moved).toEqual({ ...dry, dryRun: false });
    expect(progress).toEqual([2, 3]);
    expect(await count(`queue = 'billing-dead'`)).toBe(2);
    expect(await count(`queue = 'billing-dead' AND task = 'refund'`)).toBe(2);
    // Fresh jobs on the source queue, with a fresh budget, that the now-healthy upstream completes.
    await waitFor(async () => (await count(`queue = 'billing' AND task = 'charge' AND state = 'completed'`)) === 3, 'the redriven charges to complete');
    const { rows: back } = await sql.query(
      `SELECT args->>'card' AS card, attempt, dead_letter_queue, source_id FROM stampeded_jobs WHERE queue = 'billing' AND state = 'completed' ORDER BY 1`,
    );
    expect(back).toEqual(['1111', '4242', '5555'].map((card) => ({ card, attempt: 1, dead_letter_queue: 'billing-dead', source_id: null })));

    // By task, and then again: the second run finds nothing left to move.
    expect(await queue.redrive('billing-dead', { task: 'refund' })).toEqual({
      queue: 'billing-dead',
      dryRun: false,
      moved: 2,
      bySource: [{ sourceQueue: 'billing', task: 'refund', jobs: 2 }],
    });
    expect(await queue.redrive('billing-dead', { task: 'refund' })).toEqual({ queue: 'billing-dead', dryRun: false, moved: 0, bySource: [] });
    await waitFor(async () => (await count(`queue = 'billing' AND state = 'completed'`)) === 5, 'the redriven refunds to complete');
    expect((await queue.counts('billing-dead')).available).toBe(0);
    upstream.failing = true;
  });

  it("gives a redriven job its source job's settings, or the jobs table's DEFAULTs once the source was pruned", async () => {
    // Copies as stampeded_fail writes them, on a queue no worker of this app runs: one whose source job is
    // still there with settings of its own, one whose source the pruner has deleted.
    const [source] = (
      await sql.query(
        `INSERT INTO stampeded_jobs (queue, task, state, attempt, max_attempts, expire_seconds, max_deferrals, remove_on_complete, finished_at)
         VALUES ('ledger', 'post', 'discarded', 1, 1, 45, 4, true, now()) RETURNING id`,
      )
    ).rows;
    await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, args, source_id, source_queue, source_attempts, max_attempts)
       VALUES ('ledger-dead', 'post', '{"n": 1}', $1, 'ledger', 1, 1), ('ledger-dead', 'post', '{"n": 2}', gen_random_uuid(), 'ledger', 1, 1)`,
      [source.id],
    );
    await sql.query(`ALTER TABLE stampeded_jobs ALTER COLUMN expire_seconds SET DEFAULT 90, ALTER COLUMN max_deferrals SET DEFAULT 6`);
    try {
      expect((await queue.redrive('ledger-dead')).moved).toBe(2);
    } finally {
      await sql.query(`ALTER TABLE stampeded_jobs ALTER COLUMN expire_seconds SET DEFAULT 3600, ALTER COLUMN max_deferrals SET DEFAULT 100`);
    }
    const { rows } = await sql.query(
      `SELECT (args->>'n')::int AS n, expire_seconds, max_deferrals, remove_on_complete, dead_letter_queue
         FROM stampeded_jobs WHERE queue = 'ledger' AND state = 'available' ORDER BY 1`,
    );
    expect(rows).toEqual([
      { n: 1, expire_seconds: 45, max_deferrals: 4, remove_on_complete: true, dead_letter_queue: 'ledger-dead' },
      { n: 2, expire_seconds: 90, max_deferrals: 6, remove_on_complete: false, dead_letter_queue: 'ledger-dead' },
    ]);
  });

  it('moves each copy once when two redrives of one queue run at the same time', async () => {
    upstream.failing = false;
    const [a, b] = await Promise.all([queue.redrive('imports-dead', { batchSize: 7 }), queue.redrive('imports-dead', { batchSize: 7 })]);
    expect(a.moved + b.moved).toBe(120);
    for (const result of [a, b]) expect(result.bySource.reduce((n, s) => n + s.jobs, 0)).toBe(result.moved);
    expect(await count(`queue = 'imports-dead'`)).toBe(0);
    // Each row went back once: its discarded original and one fresh job, never two.
    const { rows } = await sql.query(
      `SELECT args->>'n' AS n, count(*) FILTER (WHERE state = 'discarded') AS failed, count(*) FILTER (WHERE state <> 'discarded') AS redriven
         FROM stampeded_jobs WHERE queue = 'imports' GROUP BY 1`,
    );
    expect(rows).toHaveLength(120);
    expect(rows.every((r) => Number(r.failed) === 1 && Number(r.redriven) === 1)).toBe(true);
    await waitFor(async () => (await count(`queue = 'imports' AND state = 'completed'`)) === 120, 'the redriven rows to complete');
    expect(await queue.counts('imports')).toMatchObject({ completed: 120, discarded: 120, available: 0 });
  });
});
