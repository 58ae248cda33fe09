import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { REQUIRED_SERVER_VERSION_NUM } from '../../stampeded.constants.js';
import { SERVER_TOO_OLD } from '../../stampeded.messages.js';
import { StampededConfigError } from '../../errors/stampeded.errors.js';
import { quoteIdent } from '../statement.js';
import { seedInstalledByAnother } from './seed-adoption.js';

export interface MigrationFile {
  version: number;
  name: string;
  file: string;
}

/**
 * In order. The seed is 1, verbatim. A numbered migration changes tables,
 * columns, indexes and data, and is never edited once released; the SQL
 * functions live one to a file in ../functions/ (FUNCTION_FILES) and are
 * applied after the numbered migrations whenever their text changes.
 */
export const MIGRATION_FILES: readonly MigrationFile[] = [
  { version: 1, name: 'seed', file: '0001_seed.sql' },
  { version: 2, name: 'maintenance', file: '0002_maintenance.sql' },
  { version: 3, name: 'flow', file: '0003_flow.sql' },
  { version: 4, name: 'operations', file: '0004_operations.sql' },
  { version: 5, name: 'contention', file: '0005_contention.sql' },
  { version: 6, name: 'cost', file: '0006_cost.sql' },
  { version: 7, name: 'queue_pause', file: '0007_queue_pause.sql' },
  { version: 8, name: 'backoff_base', file: '0008_backoff_base.sql' },
  { version: 9, name: 'results', file: '0009_results.sql' },
  { version: 10, name: 'rate_limits', file: '0010_rate_limits.sql' },
  { version: 11, name: 'ordering', file: '0011_ordering.sql' },
];

export const LATEST_VERSION = MIGRATION_FILES[MIGRATION_FILES.length - 1].version;

/**
 * Migrations of the numbering used before the functions moved to their own
 * files, which those files replaced whole: an install that recorded them has
 * what they made, and its rows go. The others keep their name under a new
 * version (see RENUMBER).
 */
const ABSORBED_MIGRATIONS = ['runtime', 'reliability', 'throughput'];

/**
 * Brings an install's record to the current numbering, by name: names are
 * unique and never reused, so this is a no-op on a current install. Through
 * negative versions, so that no two rows share a version on the way.
 */
const RENUMBER = [
  `DELETE FROM stampeded_schema_migrations WHERE name = ANY($1::text[])`,
  `UPDATE stampeded_schema_migrations m SET version = -c.version
     FROM unnest($1::int[], $2::text[]) AS c (version, name)
    WHERE m.name = c.name AND m.version <> c.version`,
  `UPDATE stampeded_schema_migrations SET version = -version WHERE version < 0`,
];

/** A function's file, and the checksum of its text that the install records when it applies it. */
export interface FunctionFile {
  name: string;
  checksum: string;
}

const FUNCTIONS_DIR = new URL('../functions/', import.meta.url);

let functionFiles: readonly (FunctionFile & { text: string })[] | undefined;
/** Every function file shipped, by name. */
export function loadFunctionFiles(): readonly (FunctionFile & { text: string })[] {
  functionFiles ??= readdirSync(FUNCTIONS_DIR)
    .filter((f) => f.endsWith('.sql'))
    .sort()
    .map((f) => {
      const text = readFileSync(new URL(f, FUNCTIONS_DIR), 'utf8');
      return { name: f.slice(0, -'.sql'.length), text, checksum: createHash('sha256').update(text).digest('hex') };
    });
  return functionFiles;
}

/**
 * Run after anything is applied: each function runs with the search_path of
 * the schema it was installed in, so that it means the same thing whoever
 * calls it, and pg_temp last, so that a temporary table cannot shadow ours.
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
 * so a name such as "MyApp", "tenant-1" or one with a quote fails to install
 * with "invalid name syntax", or resolves to another schema.
 */
export function assertSchemaName(schema: string): void {
  if (typeof schema !== 'string' || !/^[a-z_][a-z0-9_$]*$/.test(schema) || Buffer.byteLength(schema) > 63) {
    throw new StampededConfigError(
      `Schema name ${JSON.stringify(schema)} is not supported: use a plain lower-case identifier ` +
        `(a-z, 0-9, "_", not starting with a digit, at most 63 bytes), one PostgreSQL never needs quoted.`,
    );
  }
}

const CREATE_MIGRATIONS_TABLE = `
CREATE TABLE IF NOT EXISTS stampeded_schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`;

const CREATE_FUNCTIONS_TABLE = `
CREATE TABLE IF NOT EXISTS stampeded_schema_functions (
    name       text        PRIMARY KEY,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`;

/** What an apply did: the numbered migrations, and the functions whose text was new to the install. */
export interface AppliedChanges {
  migrations: MigrationFile[];
  functions: string[];
  /**
   * Present when the schema held the seed installed by another runtime: the
   * migration (1, the seed) recorded as applied without running it.
   */
  adopted?: MigrationFile;
}

/**
 * Applies what this schema lacks, inside the caller's transaction, so that a
 * failure leaves nothing half-applied: the numbered migrations up to `upTo`
 * and then, once every migration is in, each function whose file's text
 * differs from what the install recorded (functions are written for the
 * latest tables, so an install held at an older version keeps the functions
 * it has). Safe to call from many processes at once (an advisory lock orders
 * them) and from both the migrate() helper and a TypeORM DataSource: each
 * migration and function records itself and is skipped once there.
 */
export async function applyMigrations(
  run: SqlRunner,
  options: { schema?: string; upTo?: number; onApplied?: (m: MigrationFile) => void } = {},
): Promise<AppliedChanges> {
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
  await run(CREATE_MIGRATIONS_TABLE);
  await run(RENUMBER[0], [ABSORBED_MIGRATIONS]);
  await run(RENUMBER[1], [MIGRATION_FILES.map((m) => m.version), MIGRATION_FILES.map((m) => m.name)]);
  await run(RENUMBER[2]);
  const done = new Set((await run(`SELECT version FROM stampeded_schema_migrations`)).map((r) => Number(r.version)));
  const applied: AppliedChanges = { migrations: [], functions: [] };
  const adopted = await adoptSeedInstall(run, done, options.upTo);
  if (adopted) applied.adopted = adopted;
  for (const migration of MIGRATION_FILES) {
    if (options.upTo !== undefined && migration.version > options.upTo) break;
    if (done.has(migration.version)) continue;
    await run(migrationSql(migration.file));
    await run(`INSERT INTO stampeded_schema_migrations (version, name) VALUES ($1, $2)`, [migration.version, migration.name]);
    done.add(migration.version);
    applied.migrations.push(migration);
    options.onApplied?.(migration);
  }
  if (MIGRATION_FILES.every((m) => done.has(m.version))) applied.functions = await applyFunctions(run);
  if (applied.migrations.length || applied.functions.length) await run(PIN_SEARCH_PATH);
  return applied;
}

/**
 * Records migration 1 without running it when the schema already holds the
 * seed, made by another runtime (see seed-adoption.ts): called under the
 * runner's lock, so that of two processes migrating at once one adopts and
 * the other finds migration 1 recorded. Refuses, before anything is written,
 * a schema whose stampeded_* objects are not exactly the seed's.
 */
async function adoptSeedInstall(run: SqlRunner, done: Set<number>, upTo: number | undefined): Promise<MigrationFile | undefined> {
  const seed = MIGRATION_FILES[0];
  if (done.has(seed.version) || (upTo !== undefined && upTo < seed.version)) return undefined;
  if (!(await seedInstalledByAnother(run, () => run(migrationSql(seed.file))))) return undefined;
  await run(`INSERT INTO stampeded_schema_migrations (version, name) VALUES ($1, $2)`, [seed.version, seed.name]);
  done.add(seed.version);
  return seed;
}

/**
 * Creates or replaces each function whose file changed. Bodies are not
 * checked at creation (as pg_dump restores them): a function may call one
 * whose file sorts after its own.
 */
async function applyFunctions(run: SqlRunner): Promise<string[]> {
  await run(CREATE_FUNCTIONS_TABLE);
  const recorded = new Map((await run(`SELECT name, checksum FROM stampeded_schema_functions`)).map((r) => [r.name, r.checksum]));
  const changed = loadFunctionFiles().filter((f) => recorded.get(f.name) !== f.checksum);
  if (!changed.length) return [];
  const [{ previous }] = await run(`SELECT current_setting('check_function_bodies') AS previous`);
  await run(`SELECT set_config('check_function_bodies', 'off', true)`);
  for (const f of changed) {
    await run(f.text);
    await run(
      `INSERT INTO stampeded_schema_functions (name, checksum) VALUES ($1, $2)
       ON CONFLICT (name) DO UPDATE SET checksum = excluded.checksum, applied_at = now()`,
      [f.name, f.checksum],
    );
  }
  await run(`SELECT set_config('check_function_bodies', $1, true)`, [previous]);
  return changed.map((f) => f.name);
}

/**
 * What an install lacks, read without changing it: the numbered migrations
 * not recorded (by name, so that an install recorded under the numbering
 * before the functions moved reads right) and the functions whose recorded
 * text is not this version's. Null when Stampeded is not installed there.
 */
export async function pendingChanges(run: SqlRunner, schema: string): Promise<{ migrations: MigrationFile[]; functions: string[] } | null> {
  const [{ present, functions }] = await run(`SELECT to_regclass($1) IS NOT NULL AS present, to_regclass($2) IS NOT NULL AS functions`, [
    `${quoteIdent(schema)}.stampeded_schema_migrations`,
    `${quoteIdent(schema)}.stampeded_schema_functions`,
  ]);
  if (!present) return null;
  const names = new Set((await run(`SELECT name FROM ${quoteIdent(schema)}.stampeded_schema_migrations`)).map((r) => String(r.name)));
  if (!names.has('seed')) return null;
  const recorded = functions
    ? new Map((await run(`SELECT name, checksum FROM ${quoteIdent(schema)}.stampeded_schema_functions`)).map((r) => [r.name, r.checksum]))
    : new Map();
  return {
    migrations: MIGRATION_FILES.filter((m) => !names.has(m.name)),
    functions: loadFunctionFiles()
      .filter((f) => recorded.get(f.name) !== f.checksum)
      .map((f) => f.name),
  };
}
