import pg from 'pg';
import { DataSource } from 'typeorm';
import { QueueService, StampededConfigError, migrate, stampededMigrations } from '@stampeded/nestjs';
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
      const { rows: recorded } = await sql.query(`SELECT count(*)::int AS n FROM stampeded_schema_functions`);
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

  it('refuses PostgreSQL 17, naming the version found and the version needed, and writes nothing', async () => {
    const pg17 = await startPostgresMajor(17, { durable: false });
    try {
      const error = await migrate(pg17.url, { schema: 'stampeded' }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StampededConfigError);
      expect((error as Error).message).toMatch(/needs PostgreSQL 18 or newer .* the server is PostgreSQL 17\.\d+/);
      const client = new pg.Client(pg17.url);
      await client.connect();
      const { rows } = await client.query(
        `SELECT (SELECT count(*) FROM pg_namespace WHERE nspname = 'stampeded')::int AS schemas,
                (SELECT count(*) FROM pg_class WHERE relname LIKE 'stampeded%')::int AS tables`,
      );
      await client.end();
      expect(rows[0]).toEqual({ schemas: 0, tables: 0 });
      await expect(bootApp(pg17.url, { via: 'connection', stampeded: { worker: { enabled: false } } })).rejects.toThrow(/PostgreSQL 17/);
    } finally {
      await pg17.stop();
    }
  });
});
