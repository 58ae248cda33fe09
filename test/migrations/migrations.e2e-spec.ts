import pg from 'pg';
import { DataSource } from 'typeorm';
import { QueueService, migrate, stampededMigrations } from '@stampeded/nestjs';
import { MIGRATION_FILES } from '@stampeded/nestjs/internal';
import type { TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase } from '../support/test-app.js';
import { startPostgresMajor } from '../support/postgres-major.mjs';

describe('migrations', () => {
  let db: TestDatabase;

  beforeEach(async () => {
    db = await testDatabase();
  });

  afterEach(async () => {
    await db?.drop();
  });

  it('migrate() installs every migration once, in one transaction, and is idempotent', async () => {
    const applied = await migrate(db.url);
    expect(applied.migrations.map((m) => m.version)).toEqual(MIGRATION_FILES.map((m) => m.version));
    expect(applied.functions).toContain('stampeded_claim_batch');
    expect(await migrate(db.url)).toEqual({ migrations: [], functions: [] });
    const sql = await sqlClient(db.url);
    try {
      const { rows } = await sql.query(`SELECT version FROM stampeded_schema_migrations ORDER BY version`);
      expect(rows.map((r) => r.version)).toEqual(MIGRATION_FILES.map((m) => m.version));
      // Each function once, at its file's definition; the seed's own (other runtimes call them) kept.
      const { rows: fns } = await sql.query(
        `SELECT proname, count(*)::int AS n FROM pg_proc WHERE pronamespace = 'public'::regnamespace AND proname LIKE 'stampeded%' GROUP BY proname`,
      );
      expect(fns.filter((f) => f.n !== 1)).toEqual([]);
      const names = fns.map((f) => f.proname);
      expect(names).toEqual(
        expect.arrayContaining(['stampeded_claim_batch', 'stampeded_fail', 'stampeded_reap', 'stampeded_complete_many', 'stampeded_checkpoint']),
      );
      expect(names).toEqual(expect.arrayContaining(['stampeded_claim', 'stampeded_complete', 'stampeded_heartbeat']));
      // Besides the function files, what an older server lacks (uuidv7() before 18, ...), recorded under its own name.
      const { rows: recorded } = await sql.query(`SELECT count(*)::int AS n FROM stampeded_schema_functions WHERE name LIKE 'stampeded%'`);
      expect(recorded[0].n).toBe(applied.functions.length);
    } finally {
      await sql.end();
    }
  });

  it('runs as TypeORM migration classes in the app DataSource, and the module then applies nothing twice', async () => {
    const dataSource = new DataSource({ type: 'postgres', url: db.url, migrations: stampededMigrations(), migrationsTableName: 'app_migrations' });
    await dataSource.initialize();
    const ran = await dataSource.runMigrations();
    expect(ran).toHaveLength(MIGRATION_FILES.length + 1);
    expect(ran.at(-1)!.name).toMatch(/^StampededFunctions[0-9a-f]{12}\d{13}$/);
    expect(ran[0].name).toMatch(/^StampededSeed\d{13}$/);
    await dataSource.destroy();

    const app = await bootApp(db.url, { stampeded: { migrations: 'auto', worker: { enabled: false } } });
    const { id } = await app.get(QueueService).enqueue('x', {});
    expect(id).toMatch(/-/);
    await app.close();
    const sql = await sqlClient(db.url);
    try {
      const { rows } = await sql.query(`SELECT count(*)::int AS n FROM stampeded_schema_migrations`);
      expect(rows[0].n).toBe(MIGRATION_FILES.length);
    } finally {
      await sql.end();
    }
  });

  it('refuses to start against an unmigrated schema, saying how to migrate', async () => {
    await expect(bootApp(db.url, { stampeded: { migrations: 'none', worker: { enabled: false } } })).rejects.toThrow(
      /Stampeded's tables are not in schema "public". Run its migrations first/,
    );
  });

  it('installs into a named schema, created when missing', async () => {
    await migrate(db.url, { schema: 'jobs' });
    const sql = await sqlClient(db.url);
    try {
      const { rows } = await sql.query(`SELECT to_regclass('jobs.stampeded_jobs') AS t, to_regclass('public.stampeded_jobs') AS p`);
      expect(rows[0]).toEqual({ t: 'jobs.stampeded_jobs', p: null });
    } finally {
      await sql.end();
    }
  });

  it('installs on PostgreSQL 17 and boots an app there, with the forms for a server before 18 recorded', async () => {
    const pg17 = await startPostgresMajor(17, { durable: false });
    try {
      const applied = await migrate(pg17.url, { schema: 'stampeded' });
      expect(applied.migrations.map((m) => m.version)).toEqual(MIGRATION_FILES.map((m) => m.version));
      const client = new pg.Client(pg17.url);
      await client.connect();
      try {
        const { rows } = await client.query(
          `SELECT name, server_version_num FROM stampeded.stampeded_schema_functions
            WHERE name IN ('uuidv7', 'stampeded_complete', 'stampeded_claim_batch') ORDER BY name`,
        );
        expect(rows.map((r) => r.name)).toEqual(['stampeded_claim_batch', 'stampeded_complete', 'uuidv7']);
        expect(rows.every((r) => Math.floor(r.server_version_num / 10000) === 17)).toBe(true);
        // The install's own uuidv7(), and the seed's stampeded_complete in its form without RETURNING OLD.
        const { rows: fns } = await client.query(
          `SELECT (SELECT count(*) FROM pg_proc WHERE proname = 'uuidv7' AND pronamespace = 'stampeded'::regnamespace)::int AS uuidv7,
                  position('RETURNING OLD' IN pg_get_functiondef('stampeded.stampeded_complete(text, uuid, uuid, smallint)'::regprocedure)) AS old`,
        );
        expect(fns[0]).toEqual({ uuidv7: 1, old: 0 });
      } finally {
        await client.end();
      }
      const app = await bootApp(pg17.url, { via: 'connection', stampeded: { schema: 'stampeded', worker: { enabled: false } } });
      try {
        const { id } = await app.get(QueueService).enqueue('pg17-job', {});
        expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      } finally {
        await app.close();
      }
    } finally {
      await pg17.stop();
    }
  });
});
