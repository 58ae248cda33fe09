import { readFileSync } from 'node:fs';
import { REQUIRED_SERVER_VERSION_NUM } from '../../stampeded.constants.js';
import { SERVER_TOO_OLD } from '../../stampeded.messages.js';
import { StampededConfigError } from '../../errors/stampeded.errors.js';
import { quoteIdent } from '../statement.js';

export interface MigrationFile {
  version: number;
  name: string;
  file: string;
}

/** In order. The seed is 1; every later change is a new file, never an edit. */
export const MIGRATION_FILES: readonly MigrationFile[] = [
  { version: 1, name: 'seed', file: '0001_seed.sql' },
  { version: 2, name: 'runtime', file: '0002_runtime.sql' },
  { version: 3, name: 'maintenance', file: '0003_maintenance.sql' },
  { version: 5, name: 'flow', file: '0005_flow.sql' },
  { version: 6, name: 'reliability', file: '0006_reliability.sql' },
  { version: 7, name: 'operations', file: '0007_operations.sql' },
  { version: 8, name: 'throughput', file: '0008_throughput.sql' },
  { version: 9, name: 'contention', file: '0009_contention.sql' },
  { version: 10, name: 'cost', file: '0010_cost.sql' },
];

export const LATEST_VERSION = MIGRATION_FILES[MIGRATION_FILES.length - 1].version;

/**
 * Run after every migration past the seed: each function runs with the
 * search_path of the schema it was installed in (why: migration 2). Until
 * migration 7 every file ended with this block itself; from migration 8 a
 * function a migration creates is pinned here, however the file ends.
 */
const PIN_SEARCH_PATH = `
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace = current_schema()::regnamespace
           AND p.proname LIKE 'stampeded\\_%'
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, current_schema());
    END LOOP;
END $$`;

/** Runs one SQL text (several statements when it has no parameters) and returns its rows. */
export type SqlRunner = (text: string, params?: unknown[]) => Promise<Record<string, unknown>[]>;

const sqlCache = new Map<string, string>();
function migrationSql(file: string): string {
  let text = sqlCache.get(file);
  if (text === undefined) {
    text = readFileSync(new URL(`./${file}`, import.meta.url), 'utf8');
    sqlCache.set(file, text);
  }
  return text;
}

export async function assertServerVersion(run: SqlRunner): Promise<void> {
  const [row] = await run(`SELECT current_setting('server_version_num')::int AS num, current_setting('server_version') AS version`);
  if (Number(row.num) < REQUIRED_SERVER_VERSION_NUM) throw new StampededConfigError(SERVER_TOO_OLD(String(row.version)));
}

/**
 * Refuses a schema name that PostgreSQL would need quoted. The migrations'
 * own functions read the schema back unquoted (`current_schema()::regnamespace`),
 * so a name such as "MyApp", "tenant-1" or one with a quote failed to install
 * with "invalid name syntax", or would resolve to another schema. Found by
 * the security tests (test/security.e2e-spec.ts), which install into a schema
 * named like an injection attempt.
 */
export function assertSchemaName(schema: string): void {
  if (typeof schema !== 'string' || !/^[a-z_][a-z0-9_$]*$/.test(schema) || Buffer.byteLength(schema) > 63) {
    throw new StampededConfigError(
      `Schema name ${JSON.stringify(schema)} is not supported: use a plain lower-case identifier ` +
        `(a-z, 0-9, "_", not starting with a digit, at most 63 bytes), one PostgreSQL never needs quoted.`,
    );
  }
}

/**
 * Applies the migrations up to `upTo` that this schema lacks, inside the
 * caller's transaction, so that a failure leaves nothing half-applied. Safe
 * to call from many processes at once (an advisory lock orders them) and
 * from both the migrate() helper and a TypeORM DataSource: each migration
 * records itself in stampeded_schema_migrations and is skipped once there.
 */
export async function applyMigrations(
  run: SqlRunner,
  options: { schema?: string; upTo?: number; onApplied?: (m: MigrationFile) => void } = {},
): Promise<MigrationFile[]> {
  await assertServerVersion(run);
  if (options.schema) {
    assertSchemaName(options.schema);
    await run(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(options.schema)}`);
    // Local to the transaction: the seed creates its objects unqualified.
    await run(`SELECT set_config('search_path', $1, true)`, [quoteIdent(options.schema)]);
  }
  const [{ schema }] = await run(`SELECT current_schema() AS schema`);
  if (schema == null) {
    throw new StampededConfigError('The connection has no current schema (its search_path names none that exists). Pass a schema to migrate.');
  }
  await run(`SELECT pg_advisory_xact_lock(hashtextextended('stampeded.migrate.' || current_schema(), 0))`);
  await run(`
    CREATE TABLE IF NOT EXISTS stampeded_schema_migrations (
        version    integer     PRIMARY KEY,
        name       text        NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
    )`);
  const done = new Set((await run(`SELECT version FROM stampeded_schema_migrations`)).map((r) => Number(r.version)));
  const applied: MigrationFile[] = [];
  for (const migration of MIGRATION_FILES) {
    if (options.upTo !== undefined && migration.version > options.upTo) break;
    if (done.has(migration.version)) continue;
    await run(migrationSql(migration.file));
    if (migration.version > 1) await run(PIN_SEARCH_PATH);
    await run(`INSERT INTO stampeded_schema_migrations (version, name) VALUES ($1, $2)`, [migration.version, migration.name]);
    applied.push(migration);
    options.onApplied?.(migration);
  }
  return applied;
}

/** The versions applied in a schema, or [] when Stampeded is not installed there. */
export async function appliedVersions(run: SqlRunner, schema: string): Promise<number[]> {
  const [{ present }] = await run(`SELECT to_regclass($1) IS NOT NULL AS present`, [`${quoteIdent(schema)}.stampeded_schema_migrations`]);
  if (!present) return [];
  const rows = await run(`SELECT version FROM ${quoteIdent(schema)}.stampeded_schema_migrations ORDER BY version`);
  return rows.map((r) => Number(r.version));
}
