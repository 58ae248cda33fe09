import type pg from 'pg';
import { QueueService, migrate } from '@stampeded/nestjs';
import { applyMigrations } from '@stampeded/nestjs/internal';
import type { TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase } from '../support/test-app.js';

// A server upgraded under an install (pg_upgrade from 14 or 16 to 18) keeps
// the objects made for the old version: the install's own uuidv7() behind the
// id defaults, the functions' forms without RETURNING OLD, and (from 14 or 15)
// the immutable date_trunc() the dedup key's generated column names. The
// install is made here on the suite's PostgreSQL 18 as for the older server
// (applyMigrations' asServerVersionNum), which is the state pg_upgrade
// leaves; the binaries packages ship no pg_upgrade to make it for real.

describe('a server upgraded to 18 under an install', () => {
  let db: TestDatabase;
  let sql: pg.Client;

  beforeEach(async () => {
    db = await testDatabase();
    sql = await sqlClient(db.url);
  });

  afterEach(async () => {
    await sql?.end();
    await db?.drop();
  });

  async function installAs(serverVersionNum: number) {
    const run = async (text: string, params?: unknown[]) => (await sql.query(text, params)).rows;
    await sql.query('BEGIN');
    await applyMigrations(run, { asServerVersionNum: serverVersionNum });
    await sql.query('COMMIT');
  }

  const defaults = async () =>
    (
      await sql.query(
        `SELECT c.relname, pg_get_expr(d.adbin, d.adrelid) AS expr
           FROM pg_attrdef d JOIN pg_class c ON c.oid = d.adrelid JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
          WHERE c.relname IN ('stampeded_jobs', 'stampeded_jobs_default', 'stampeded_workers') AND a.attname = 'id' ORDER BY 1`,
      )
    ).rows;

  it.each([
    [160000, ['uuidv7']],
    [140000, ['date_trunc', 'uuidv7']],
  ])('from %i: keeps working, and the next migrate moves ids and functions to 18', async (from, compat) => {
    await installAs(from);
    const { rows: made } = await sql.query(`SELECT name, server_version_num FROM stampeded_schema_functions WHERE name NOT LIKE 'stampeded%' ORDER BY name`);
    expect(made).toEqual(compat.map((name) => ({ name, server_version_num: from })));
    // Shown qualified: pg_catalog's uuidv7() is the one unqualified means on 18.
    expect(await defaults()).toEqual([
      { relname: 'stampeded_jobs', expr: 'public.uuidv7()' },
      { relname: 'stampeded_jobs_default', expr: 'public.uuidv7()' },
      { relname: 'stampeded_workers', expr: 'public.uuidv7()' },
    ]);
    const before = (
      await sql.query(
        `INSERT INTO stampeded_jobs (queue, task, dedup_scope, dedup_period) VALUES ('up', 't', 'k', 'day'), ('up', 't', NULL, NULL) RETURNING id::text`,
      )
    ).rows.map((r) => r.id);

    // The app runs on what the old server's migrate installed: its forms run on 18 too.
    const app = await bootApp(db.url, { stampeded: { migrations: 'none', worker: { enabled: false } } });
    try {
      const queue = app.get(QueueService);
      expect(await queue.enqueue('t', {}, { queue: 'up', dedup: { scope: 'k', period: 'day' } })).toEqual({ id: before[0], deduplicated: true });
    } finally {
      await app.close();
    }

    const applied = await migrate(db.url);
    expect(applied.migrations).toEqual([]);
    expect(applied.functions.sort()).toEqual(['stampeded_checkpoint', 'stampeded_complete', 'stampeded_release']);
    // pg_catalog's uuidv7() draws the ids now (shown unqualified); the install's own is gone.
    expect(await defaults()).toEqual([
      { relname: 'stampeded_jobs', expr: 'uuidv7()' },
      { relname: 'stampeded_jobs_default', expr: 'uuidv7()' },
      { relname: 'stampeded_workers', expr: 'uuidv7()' },
    ]);
    const { rows: fns } = await sql.query(
      `SELECT (SELECT count(*) FROM pg_proc WHERE proname = 'uuidv7' AND pronamespace = 'public'::regnamespace)::int AS own_uuidv7,
              position('RETURNING OLD.state' IN pg_get_functiondef('stampeded_complete(text, uuid, uuid, smallint)'::regprocedure)) > 0 AS seed_form`,
    );
    expect(fns[0]).toMatchObject({ own_uuidv7: 0, seed_form: true });
    const { rows: recorded } = await sql.query(
      `SELECT DISTINCT name LIKE 'stampeded%' AS file, server_version_num / 10000 AS major FROM stampeded_schema_functions`,
    );
    expect(recorded).toEqual(expect.arrayContaining([{ file: true, major: 18 }, ...(compat.includes('date_trunc') ? [{ file: false, major: 14 }] : [])]));
    expect(recorded.filter((r) => r.file)).toEqual([{ file: true, major: 18 }]);

    // The jobs are where they were, the dedup key finds its twin, and new ids sort after the old ones.
    const after = (await sql.query(`INSERT INTO stampeded_jobs (queue, task) VALUES ('up', 't') RETURNING id::text`)).rows[0].id;
    expect(after > before[1] && before[1] > before[0]).toBe(true);
    await expect(sql.query(`INSERT INTO stampeded_jobs (queue, task, dedup_scope, dedup_period) VALUES ('up', 't', 'k', 'day')`)).rejects.toThrow(
      /stampeded_jobs.*dedup/,
    );
    const { rows: jobs } = await sql.query(`SELECT id::text FROM stampeded_jobs WHERE queue = 'up' ORDER BY id`);
    expect(jobs.map((r) => r.id)).toEqual([...before, after]);
    expect(await migrate(db.url)).toEqual({ migrations: [], functions: [] });
  });
});
