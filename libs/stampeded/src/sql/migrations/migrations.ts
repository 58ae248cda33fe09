import { REQUIRED_SERVER_VERSION_NUM } from '../../stampeded.constants.js';
import { NO_CURRENT_SCHEMA, SERVER_TOO_OLD, UNSUPPORTED_SCHEMA_NAME } from '../../stampeded.messages.js';
import { StampededConfigError } from '../../errors/stampeded.errors.js';
import { quoteIdent } from '../statement.js';
import { applyFunctions, loadFunctionFiles, runsOn } from './function-files.js';
import { MIGRATION_FILES, migrationSql, renumberRecorded, type MigrationFile } from './migration-files.js';
import { provideCompat, runSeed } from './server-compat.js';
import { seedInstalledByAnother } from './seed-adoption.js';
import {
  CREATE_FUNCTIONS_TABLE,
  CREATE_MIGRATIONS_TABLE,
  createSchema,
  CURRENT_SCHEMA,
  INSTALL_RECORDS,
  LOCK_SCHEMA_FOR_MIGRATION,
  PIN_SEARCH_PATH,
  RECORD_MIGRATION,
  RECORDED_VERSIONS,
  recordedFunctionsIn,
  recordedMigrationNamesIn,
  SERVER_VERSION,
  SET_LOCAL_SEARCH_PATH,
} from './runner.sql.js';

// The migration runner. The list of migrations is in migration-files.ts,
// the function files in function-files.ts, what an older server needs in
// server-compat.ts, adopting another runtime's install in seed-adoption.ts,
// and every statement in runner.sql.ts.

/** Runs one SQL text (several statements when it has no parameters) and returns its rows. */
export type SqlRunner = (text: string, params?: unknown[]) => Promise<Record<string, unknown>[]>;

/** Refuses a server older than Stampeded supports; returns its server_version_num. */
export async function assertServerVersion(run: SqlRunner): Promise<number> {
  const [row] = await run(SERVER_VERSION);
  if (Number(row.num) < REQUIRED_SERVER_VERSION_NUM) throw new StampededConfigError(SERVER_TOO_OLD(String(row.version)));
  return Number(row.num);
}

/**
 * Refuses a schema name that PostgreSQL would need quoted. The migrations'
 * own functions read the schema back unquoted (`current_schema()::regnamespace`),
 * so a name such as "MyApp", "tenant-1" or one with a quote fails to install
 * with "invalid name syntax", or resolves to another schema.
 */
export function assertSchemaName(schema: string): void {
  if (typeof schema !== 'string' || !/^[a-z_][a-z0-9_$]*$/.test(schema) || Buffer.byteLength(schema) > 63) {
    throw new StampededConfigError(UNSUPPORTED_SCHEMA_NAME(schema));
  }
}

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
  options: {
    schema?: string;
    upTo?: number;
    onApplied?: (m: MigrationFile) => void;
    /**
     * Install as for a server of this version (server_version_num), whatever
     * the server is: the state a server upgraded under an install leaves, for
     * the tests of the next migrate there. Not for use on a real install.
     */
    asServerVersionNum?: number;
  } = {},
): Promise<AppliedChanges> {
  const actualVersionNum = await assertServerVersion(run);
  const serverVersionNum = options.asServerVersionNum ?? actualVersionNum;
  if (options.schema) {
    assertSchemaName(options.schema);
    await run(createSchema(options.schema));
    // Local to the transaction: the seed creates its objects unqualified.
    await run(SET_LOCAL_SEARCH_PATH, [quoteIdent(options.schema)]);
  }
  const [{ schema }] = await run(CURRENT_SCHEMA);
  if (schema == null) throw new StampededConfigError(NO_CURRENT_SCHEMA());
  await run(LOCK_SCHEMA_FOR_MIGRATION);
  await run(CREATE_MIGRATIONS_TABLE);
  await renumberRecorded(run);
  const done = new Set((await run(RECORDED_VERSIONS)).map((r) => Number(r.version)));
  const applied: AppliedChanges = { migrations: [], functions: [] };
  const adopted = await adoptSeedInstall(run, done, options.upTo, serverVersionNum);
  if (adopted) applied.adopted = adopted;
  await run(CREATE_FUNCTIONS_TABLE);
  await provideCompat(run, serverVersionNum, done.has(1), options.asServerVersionNum !== undefined);
  for (const migration of MIGRATION_FILES) {
    if (options.upTo !== undefined && migration.version > options.upTo) break;
    if (done.has(migration.version)) continue;
    if (migration.version === 1) await runSeed(run, serverVersionNum);
    else await run(migrationSql(migration.file));
    await run(RECORD_MIGRATION, [migration.version, migration.name]);
    done.add(migration.version);
    applied.migrations.push(migration);
    options.onApplied?.(migration);
  }
  if (MIGRATION_FILES.every((m) => done.has(m.version))) applied.functions = await applyFunctions(run, serverVersionNum);
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
async function adoptSeedInstall(run: SqlRunner, done: Set<number>, upTo: number | undefined, serverVersionNum: number): Promise<MigrationFile | undefined> {
  const seed = MIGRATION_FILES[0];
  if (done.has(seed.version) || (upTo !== undefined && upTo < seed.version)) return undefined;
  if (!(await seedInstalledByAnother(run, () => runSeed(run, serverVersionNum, true)))) return undefined;
  await run(RECORD_MIGRATION, [seed.version, seed.name]);
  done.add(seed.version);
  return seed;
}

/**
 * What an install lacks, read without changing it: the numbered migrations
 * not recorded (by name, so that an install recorded under the numbering
 * before the functions moved reads right) and the functions whose recorded
 * text is not this version's. Null when Stampeded is not installed there.
 */
export async function pendingChanges(run: SqlRunner, schema: string): Promise<{ migrations: MigrationFile[]; functions: string[] } | null> {
  const [{ present, functions, num }] = await run(INSTALL_RECORDS, [
    `${quoteIdent(schema)}.stampeded_schema_migrations`,
    `${quoteIdent(schema)}.stampeded_schema_functions`,
  ]);
  if (!present) return null;
  const names = new Set((await run(recordedMigrationNamesIn(schema))).map((r) => String(r.name)));
  if (!names.has('seed')) return null;
  const recorded = functions ? new Map((await run(recordedFunctionsIn(schema))).map((r) => [r.name, r.checksum])) : new Map();
  return {
    migrations: MIGRATION_FILES.filter((m) => !names.has(m.name)),
    functions: loadFunctionFiles()
      .filter((f) => !runsOn(f, recorded.get(f.name), Number(num)))
      .map((f) => f.name),
  };
}
