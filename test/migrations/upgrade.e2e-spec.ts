import { readFileSync } from 'node:fs';
import type pg from 'pg';
import { QueueControlService, QueueService, Task, migrate, type TaskHandler } from '@stampeded/nestjs';
import { MIGRATION_FILES } from '@stampeded/nestjs/internal';
import type { TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';

// Installs made before the functions moved to one file each recorded
// migrations 1, 2, 3, 5, ... 10 and hold every function as those files left
// it. The files they ran are kept in test/fixtures/migrations-0.1.0.
const OLD_MIGRATIONS: { version: number; name: string; file: string }[] = [
  { version: 1, name: 'seed', file: '../../libs/stampeded/src/sql/migrations/0001_seed.sql' },
  { version: 2, name: 'runtime', file: '../fixtures/migrations-0.1.0/0002_runtime.sql' },
  { version: 3, name: 'maintenance', file: '../fixtures/migrations-0.1.0/0003_maintenance.sql' },
  { version: 5, name: 'flow', file: '../fixtures/migrations-0.1.0/0005_flow.sql' },
  { version: 6, name: 'reliability', file: '../fixtures/migrations-0.1.0/0006_reliability.sql' },
  { version: 7, name: 'operations', file: '../fixtures/migrations-0.1.0/0007_operations.sql' },
  { version: 8, name: 'throughput', file: '../fixtures/migrations-0.1.0/0008_throughput.sql' },
  { version: 9, name: 'contention', file: '../fixtures/migrations-0.1.0/0009_contention.sql' },
  { version: 10, name: 'cost', file: '../fixtures/migrations-0.1.0/0010_cost.sql' },
];

/** What the runner of that numbering did after each migration past the seed. */
const OLD_PIN = `
DO $$
DECLARE f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
              WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'stampeded\\_%'
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, current_schema());
    END LOOP;
END $$`;

async function installOld(sql: pg.Client, schema: string, upTo: number): Promise<void> {
  await sql.query('BEGIN');
  await sql.query(`CREATE SCHEMA ${schema}`);
  await sql.query(`SET LOCAL search_path = ${schema}`);
  await sql.query(`CREATE TABLE stampeded_schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
  for (const m of OLD_MIGRATIONS.filter((m) => m.version <= upTo)) {
    await sql.query(readFileSync(new URL(m.file, import.meta.url), 'utf8'));
    if (m.version > 1) await sql.query(OLD_PIN);
    await sql.query(`INSERT INTO stampeded_schema_migrations (version, name) VALUES ($1, $2)`, [m.version, m.name]);
  }
  await sql.query('COMMIT');
}

/** A schema's shape, with its name taken out: columns, indexes, views, triggers and function definitions. */
async function shapeOf(sql: pg.Client, schema: string): Promise<Record<string, string[]>> {
  const strip = (s: string) => s.split(`${schema}.`).join('').split(`"${schema}"`).join('').split(schema).join('<schema>');
  const list = async (text: string) => (await sql.query(text, [schema])).rows.map((r) => strip(String(r.x))).sort();
  return {
    columns: await list(
      `SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || coalesce(column_default, '') || ' ' || is_nullable AS x
         FROM information_schema.columns WHERE table_schema = $1 AND table_name NOT LIKE 'stampeded\\_jobs\\_%'`,
    ),
    indexes: await list(`SELECT indexdef AS x FROM pg_indexes WHERE schemaname = $1 AND tablename NOT LIKE 'stampeded\\_jobs\\_%'`),
    constraints: await list(
      `SELECT conrelid::regclass::text || ' ' || pg_get_constraintdef(c.oid) AS x FROM pg_constraint c WHERE connamespace = $1::regnamespace`,
    ),
    views: await list(`SELECT viewname || ' ' || definition AS x FROM pg_views WHERE schemaname = $1`),
    triggers: await list(
      `SELECT tgrelid::regclass::text || ' ' || pg_get_triggerdef(t.oid) AS x FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        WHERE c.relnamespace = $1::regnamespace AND NOT t.tgisinternal`,
    ),
    functions: await list(`SELECT pg_get_functiondef(p.oid) AS x FROM pg_proc p WHERE p.pronamespace = $1::regnamespace`),
  };
}

const handled: string[] = [];

@Task('upgraded', { queue: 'upgrade' })
class Upgraded implements TaskHandler<{ n: number }> {
  handle(args: { n: number }) {
    handled.push(`n=${args.n}`);
  }
}

describe('upgrading an install recorded under the earlier numbering', () => {
  let db: TestDatabase;
  let sql: pg.Client;

  beforeAll(async () => {
    db = await testDatabase();
    sql = await sqlClient(db.url);
  });

  afterAll(async () => {
    await sql?.end();
    await db?.drop();
  });

  it.each([
    ['at its last migration', 'old_latest', 10],
    ['part of the way (after flow control)', 'old_flow', 5],
    ['at the seed and the runtime functions', 'old_runtime', 2],
  ])('%s: migrate() renumbers its record and leaves the schema a fresh install has', async (_label, schema, upTo) => {
    await installOld(sql, schema, upTo);
    await sql.query(`SELECT ${schema}.stampeded_create_queue('upgrade')`);
    await sql.query(`INSERT INTO ${schema}.stampeded_jobs (queue, task, args) VALUES ('upgrade', 'upgraded', '{"n": 1}')`);
    // Pauses as that version wrote them (a 'hold' verdict whose reason says who and why), and rows that were not pauses.
    await sql.query(
      `INSERT INTO ${schema}.stampeded_queue_policies (queue, verdict, reason, decided_at) VALUES
         ('mail', 'hold', 'paused by ana: migrating: the mail server', '2026-01-02T03:04:05Z'),
         ('reports', 'hold', 'paused by ops (dashboard)', '2026-01-02T03:04:05Z'),
         ('capped', 'hold', 'max_running: 5 claimed or executing, cap 5', now()),
         ('resumed', 'steady', 'resumed by ana', now()),
         ('said-so', 'steady', 'paused by nobody: a steady verdict was never a pause', now())`,
    );

    const applied = await migrate(db.url, { schema });
    const expectedPending = MIGRATION_FILES.filter((m) => !OLD_MIGRATIONS.some((o) => o.name === m.name && o.version <= upTo));
    expect(applied.migrations.map((m) => m.name)).toEqual(expectedPending.map((m) => m.name));
    const { rows: recorded } = await sql.query(`SELECT version, name FROM ${schema}.stampeded_schema_migrations ORDER BY version`);
    expect(recorded).toEqual(MIGRATION_FILES.map((m) => ({ version: m.version, name: m.name })));
    expect(await migrate(db.url, { schema })).toEqual({ migrations: [], functions: [] });
    const { rows: pauses } = await sql.query(
      `SELECT queue, paused, paused_by, pause_reason, paused_at, verdict, reason FROM ${schema}.stampeded_queue_policies ORDER BY queue`,
    );
    const at = new Date('2026-01-02T03:04:05Z');
    const unpaused = { paused: false, paused_by: null, pause_reason: null, paused_at: null };
    expect(pauses).toEqual([
      { queue: 'capped', ...unpaused, verdict: 'hold', reason: 'max_running: 5 claimed or executing, cap 5' },
      {
        queue: 'mail',
        paused: true,
        paused_by: 'ana',
        pause_reason: 'migrating: the mail server',
        paused_at: at,
        verdict: 'hold',
        reason: 'paused by ana: migrating: the mail server',
      },
      { queue: 'reports', paused: true, paused_by: 'ops (dashboard)', pause_reason: null, paused_at: at, verdict: 'hold', reason: 'paused by ops (dashboard)' },
      { queue: 'resumed', ...unpaused, verdict: 'steady', reason: 'resumed by ana' },
      { queue: 'said-so', ...unpaused, verdict: 'steady', reason: 'paused by nobody: a steady verdict was never a pause' },
    ]);

    await migrate(db.url, { schema: `fresh_${schema}` });
    await sql.query(`SELECT fresh_${schema}.stampeded_create_queue('upgrade')`);
    // Migrations 9, 11 and 13 add their checks NOT VALID, so as not to read
    // the jobs table under their lock: a partition that existed then keeps
    // them so, where the fresh install's, made after, has them validated.
    // That, and nothing else, is what sets the two apart.
    const upgraded = await shapeOf(sql, schema);
    const fresh = await shapeOf(sql, `fresh_${schema}`);
    const sizeCheck =
      /^(stampeded_jobs_upgrade CHECK \((?:\(pg_column_size\((?:result|progress)\) <= \d+\)|\(\(ordering_key IS NULL\) OR \(ordering_position IS NOT NULL\)\)|\(state = ANY \(ARRAY\['pending'::text, [^)]*\]\)\))\)) NOT VALID$/;
    expect(upgraded.constraints.filter((c) => sizeCheck.test(c))).toHaveLength(4);
    expect({ ...upgraded, constraints: upgraded.constraints.map((c) => c.replace(sizeCheck, '$1')) }).toEqual(fresh);

    // The job enqueued before the upgrade runs after it.
    handled.length = 0;
    const app = await bootApp(db.url, { stampeded: { schema, migrations: 'none' }, providers: [Upgraded] });
    try {
      await waitFor(() => handled.length === 1, 'the job enqueued before the upgrade to run');
      expect(handled).toEqual(['n=1']);
      // The handler returns before its completion is written (outcomes are batched): wait for the count.
      await waitFor(async () => (await app.get(QueueService).counts('upgrade')).completed === 1, 'the job to be counted completed');
      // The service reads the pause from its columns, and a resume clears them.
      const control = app.get(QueueControlService);
      expect(await control.policy('mail')).toMatchObject({ paused: true, pausedBy: 'ana', pauseReason: 'migrating: the mail server', pausedAt: at });
      expect(await control.resume('mail', { by: 'ana' })).toMatchObject({
        paused: false,
        pausedBy: null,
        pauseReason: null,
        pausedAt: null,
      });
    } finally {
      await app.close();
    }
  });

  it('a module that finds a function behind its definition refuses to start, naming it', async () => {
    await migrate(db.url, { schema: 'stale' });
    await sql.query(`UPDATE stale.stampeded_schema_functions SET checksum = 'older' WHERE name = 'stampeded_fail'`);
    await expect(bootApp(db.url, { stampeded: { schema: 'stale', migrations: 'none', worker: { enabled: false } } })).rejects.toThrow(
      /function\(s\) stampeded_fail not at this version's definition\. Run the pending migrations/,
    );
    const applied = await migrate(db.url, { schema: 'stale' });
    expect(applied).toEqual({ migrations: [], functions: ['stampeded_fail'] });
  });
});
