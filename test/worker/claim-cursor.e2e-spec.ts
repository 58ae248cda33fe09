import { jest } from '@jest/globals';
import { ConsoleLogger, type INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { QueueService, Task, type TaskHandler } from '@stampeded/nestjs';
import { bootApp, migratedDatabase, sqlClient, waitFor } from '../support/test-app.js';

const started: string[] = [];

@Task('tick', { queue: 'held' })
class Tick implements TaskHandler<{ label: string }> {
  handle(args: { label: string }) {
    started.push(args.label);
  }
}

/** The messages the app's logger was given, at any level. */
function said(spy: { mock: { calls: unknown[][] } }, text: string): number {
  return spy.mock.calls.filter((call) => String(call[0]).includes(text)).length;
}

describe('claims while a snapshot is held open (the claim cursor)', () => {
  const database = migratedDatabase();
  let db: { url: string };
  let sql: pg.Client;
  let holder: pg.Client | undefined;
  let app: INestApplicationContext | undefined;

  beforeAll(() => {
    ({ db, sql } = database);
  });

  afterEach(async () => {
    jest.restoreAllMocks();
    await holder?.query('ROLLBACK').catch(() => {});
    await holder?.end();
    holder = undefined;
    await app?.close();
    app = undefined;
  });

  it('claims from a cursor while full claims are slow, still runs a job due before the cursor, and goes back once they are fast', async () => {
    const warn = jest.spyOn(ConsoleLogger.prototype, 'warn');
    const log = jest.spyOn(ConsoleLogger.prototype, 'log');
    // A snapshot held open, as a long report or an idle transaction holds one.
    holder = await sqlClient(db.url);
    await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await holder.query('SELECT 1');
    // Jobs inserted and deleted after it: their claim index entries, due in
    // the past and so at the index's head, stay, since the held snapshot
    // keeps their rows from being removed. A claim from the head visits
    // every one of them, as it would the jobs a busy queue claimed meanwhile.
    await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, args, scheduled_at)
       SELECT 'held', 'tick', '{"label":"gone"}', now() - interval '1 hour' + i * interval '10 ms' FROM generate_series(1, 200000) i`,
    );
    await sql.query(`DELETE FROM stampeded_jobs WHERE queue = 'held'`);

    const { pid } = (await holder.query(`SELECT pg_backend_pid() AS pid`)).rows[0];
    // Held for the seconds after which the worker names it.
    await waitFor(
      async () => (await sql.query(`SELECT now() - xact_start >= interval '5 seconds' AS old FROM pg_stat_activity WHERE pid = $1`, [pid])).rows[0].old,
      'the snapshot to be five seconds old',
    );

    app = await bootApp(db.url, { providers: [Tick], stampeded: { maintenance: { enabled: false } } });
    const queue = app.get(QueueService);
    await queue.enqueue('tick', { label: 'first' });
    await waitFor(() => started.includes('first'), 'the first job to start');
    // Its claim walked the dead entries and found the queue empty after it:
    // slow, and the warning names the session that holds the snapshot.
    await waitFor(() => said(warn, `claims of queue "held" are slow`), 'the worker to say its claims are slow');
    expect(said(warn, `pid ${pid} (`)).toBe(1);

    // Due half an hour ago: before the cursor, where only a full claim looks.
    await queue.enqueue('tick', { label: 'behind' }, { runAt: new Date(Date.now() - 30 * 60_000) });
    await queue.enqueue('tick', { label: 'ahead' });
    await waitFor(() => started.includes('behind') && started.includes('ahead'), 'both jobs to start');
    // Still claiming from the cursor: the full claims are as slow as before.
    expect(said(log, 'are fast again')).toBe(0);

    // The snapshot goes, vacuum removes the dead entries, full claims are fast again.
    await holder.query('ROLLBACK');
    await sql.query(`VACUUM stampeded_jobs`);
    await waitFor(() => said(log, 'claims of queue "held" are fast again'), 'the worker to go back to full claims');
    await queue.enqueue('tick', { label: 'after' });
    await waitFor(() => started.includes('after'), 'a job after the snapshot to start');
    expect(said(warn, 'are slow')).toBe(1);
    expect(started.filter((label) => label === 'gone')).toEqual([]);
  });
});
