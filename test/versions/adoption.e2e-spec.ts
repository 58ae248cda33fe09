import { readFileSync } from 'node:fs';
import type pg from 'pg';
import { migrate } from '@stampeded/nestjs';
import { MIGRATION_FILES } from '@stampeded/nestjs/internal';
import type { TestDatabase } from '@stampeded/testing';
import { sqlClient, testDatabase } from '../support/test-app.js';

const SEED_SQL = readFileSync(new URL('../../libs/stampeded/src/sql/migrations/0001_seed.sql', import.meta.url), 'utf8');

/**
 * The seed as another runtime installs it on this server: as-is on 18; before
 * 18 with a uuidv7() of its own (and before 16 an immutable date_trunc()
 * with a time zone), and the seed's SQL functions created unchecked, since
 * two of them use RETURNING OLD/NEW.
 */
async function installSeedAsAnotherRuntime(sql: pg.Client): Promise<void> {
  const [{ num }] = (await sql.query(`SELECT current_setting('server_version_num')::int AS num`)).rows;
  if (num >= 180000) {
    await sql.query(SEED_SQL);
    return;
  }
  await sql.query(`CREATE FUNCTION uuidv7() RETURNS uuid LANGUAGE sql AS $$ SELECT gen_random_uuid() $$`);
  if (num < 160000) {
    await sql.query(
      `CREATE FUNCTION date_trunc(text, timestamptz, text) RETURNS timestamptz LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT pg_catalog.date_trunc($1, $2, $3) $$`,
    );
  }
  await sql.query(`BEGIN; SET LOCAL check_function_bodies = off; SET LOCAL search_path = public, pg_catalog`);
  await sql.query(SEED_SQL);
  await sql.query(`COMMIT`);
}

describe('a seed install another runtime made on this PostgreSQL version', () => {
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

  it('is adopted as migration 1, its job untouched and counted, and its workers keep claiming and completing', async () => {
    await installSeedAsAnotherRuntime(sql);
    await sql.query(`SELECT stampeded_create_queue('mail')`);
    await sql.query(`INSERT INTO stampeded_jobs (queue, task, args) VALUES ('mail', 'send', '{"n": 1}')`);
    const worker = (await sql.query(`INSERT INTO stampeded_workers (hostname, pid) VALUES ('ruby-host', 4242) RETURNING id`)).rows[0].id;
    const { rows: before } = await sql.query(`SELECT to_jsonb(j) AS row FROM stampeded_jobs j`);

    const applied = await migrate(db.url);
    expect(applied.adopted).toMatchObject({ version: 1, name: 'seed' });
    expect(applied.migrations.map((m) => m.version)).toEqual(MIGRATION_FILES.slice(1).map((m) => m.version));
    const { rows: after } = await sql.query(`SELECT to_jsonb(j) AS row FROM stampeded_jobs j`);
    expect(after.map((r) => Object.fromEntries(Object.keys(before[0].row).map((k) => [k, r.row[k]])))).toEqual(before.map((r) => r.row));
    expect((await sql.query(`SELECT queue, state, n::int FROM stampeded_queue_counts_total WHERE n <> 0`)).rows).toEqual([
      { queue: 'mail', state: 'available', n: 1 },
    ]);

    // The seed's functions, with the seed's signatures.
    const claim = `SELECT id, attempt FROM stampeded_claim($1::text, $2::uuid, $3::integer)`;
    const job = (await sql.query(claim, ['mail', worker, 1])).rows[0];
    expect(job.attempt).toBe(1);
    expect(
      (
        await sql.query(`SELECT was, now_state FROM stampeded_fail($1::text, $2::uuid, $3::uuid, $4::smallint, $5::text, $6::text, $7::bigint)`, [
          'mail',
          job.id,
          worker,
          1,
          'raised',
          'boom',
          0,
        ])
      ).rows,
    ).toEqual([{ was: 'executing', now_state: 'retryable' }]);
    expect((await sql.query(claim, ['mail', worker, 1])).rows).toEqual([{ id: job.id, attempt: 2 }]);
    expect(
      (await sql.query(`SELECT was, now_state, owned FROM stampeded_complete($1::text, $2::uuid, $3::uuid, $4::smallint)`, ['mail', job.id, worker, 2])).rows,
    ).toEqual([{ was: 'executing', now_state: 'completed', owned: true }]);
    expect((await sql.query(`SELECT queue, state, n::int FROM stampeded_queue_counts_total WHERE n <> 0`)).rows).toEqual([
      { queue: 'mail', state: 'completed', n: 1 },
    ]);
  });
});
