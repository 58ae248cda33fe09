import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { REQUIRED_SERVER_VERSION_NUM } from '../../stampeded.constants.js';
import { FUNCTION_FORM_WITHOUT_BASE, NO_CURRENT_SCHEMA, SERVER_TOO_OLD, UNSUPPORTED_SCHEMA_NAME } from '../../stampeded.messages.js';
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
  { version: 12, name: 'leader_lease', file: '0012_leader_lease.sql' },
  { version: 13, name: 'workflows', file: '0013_workflows.sql' },
  { version: 14, name: 'key_lines', file: '0014_key_lines.sql' },
  { version: 15, name: 'workflow_keys', file: '0015_workflow_keys.sql' },
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

/**
 * One function file's text, and the older server versions it has a form of
 * its own for: `NAME.sql` is the form for every server without one, and
 * `NAME.preNN.sql` the form for a server older than PostgreSQL NN (of
 * several, the one with the lowest NN above the server's major). A
 * pre-form is written in the older versions' SQL, so it also runs on the
 * newer ones: a server upgraded under an install keeps working with what was
 * installed until the next migrate switches forms.
 */
export interface FunctionSource extends FunctionFile {
  text: string;
  /** By the major the form is for servers below: 18 for NAME.pre18.sql. */
  before: ReadonlyMap<number, { text: string; checksum: string }>;
}

const FUNCTIONS_DIR = new URL('../functions/', import.meta.url);
const PRE_FORM = /^(.+)\.pre(\d+)\.sql$/;

const checksumOf = (text: string) => createHash('sha256').update(text).digest('hex');

let functionFiles: readonly FunctionSource[] | undefined;
/** Every function file shipped, by name, with its forms for older servers. */
export function loadFunctionFiles(): readonly FunctionSource[] {
  if (functionFiles) return functionFiles;
  const files = readdirSync(FUNCTIONS_DIR)
    .filter((f) => f.endsWith('.sql'))
    .sort();
  const byName = new Map<string, FunctionSource>();
  for (const f of files.filter((f) => !PRE_FORM.test(f))) {
    const text = readFileSync(new URL(f, FUNCTIONS_DIR), 'utf8');
    byName.set(f.slice(0, -'.sql'.length), { name: f.slice(0, -'.sql'.length), text, checksum: checksumOf(text), before: new Map() });
  }
  for (const f of files) {
    const m = PRE_FORM.exec(f);
    if (!m) continue;
    const base = byName.get(m[1]);
    if (!base) throw new Error(FUNCTION_FORM_WITHOUT_BASE(f, m[1]));
    const text = readFileSync(new URL(f, FUNCTIONS_DIR), 'utf8');
    (base.before as Map<number, { text: string; checksum: string }>).set(Number(m[2]), { text, checksum: checksumOf(text) });
  }
  functionFiles = [...byName.values()];
  return functionFiles;
}

/** Each function's form for a server of this version (server_version_num). */
export function functionFilesFor(serverVersionNum: number): (FunctionFile & { text: string })[] {
  const major = Math.floor(serverVersionNum / 10000);
  return loadFunctionFiles().map((f) => {
    const below = [...f.before.keys()].filter((n) => major < n).sort((a, b) => a - b)[0];
    const form = below === undefined ? f : f.before.get(below)!;
    return { name: f.name, text: form.text, checksum: form.checksum };
  });
}

/**
 * Whether a recorded checksum is a form that runs on this server: its own
 * form, or a form for older servers (written in their SQL, which the newer
 * ones run too). The first is what migrate installs; the second is what a
 * server upgraded under the install still has until then.
 */
function runsOn(f: FunctionSource, checksum: unknown, serverVersionNum: number): boolean {
  const own = functionFilesFor(serverVersionNum).find((g) => g.name === f.name)!;
  if (checksum === own.checksum) return true;
  const major = Math.floor(serverVersionNum / 10000);
  return [...f.before.entries()].some(([n, form]) => n <= major && form.checksum === checksum);
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

/** Refuses a server older than Stampeded supports; returns its server_version_num. */
export async function assertServerVersion(run: SqlRunner): Promise<number> {
  const [row] = await run(`SELECT current_setting('server_version_num')::int AS num, current_setting('server_version') AS version`);
  if (Number(row.num) < REQUIRED_SERVER_VERSION_NUM) throw new StampededConfigError(SERVER_TOO_OLD(String(row.version)));
  return Number(row.num);
}

/** PostgreSQL 18, the first with uuidv7() and RETURNING OLD/NEW. */
const PG18 = 180000;

/**
 * What the seed takes from PostgreSQL 18 (or 16) and an older server lacks,
 * made in the install's schema before the seed runs, each recorded in
 * stampeded_schema_functions under its name with the server it was made for.
 */
interface Compat {
  name: string;
  /** Made on a server older than this server_version_num. */
  below: number;
  /** A query of one row and column, `present`: whether the server already has it (then nothing is made). */
  present: string;
  text: string;
}

const COMPAT: readonly Compat[] = [
  {
    // UUID version 7 as RFC 9562 lays it out and as PostgreSQL 18 draws it:
    // a 48-bit Unix millisecond timestamp, then 12 bits of the
    // sub-millisecond fraction (so that ids drawn one after another sort in
    // the order they were drawn, to the microsecond), then the variant and
    // 62 random bits. The seed's column defaults find it in the schema;
    // unqualified uuidv7() still means pg_catalog's once the server has one.
    name: 'uuidv7',
    below: 180000,
    present: `SELECT to_regprocedure('pg_catalog.uuidv7()') IS NOT NULL AS present`,
    text: `
CREATE FUNCTION uuidv7() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT encode(
               int8send((t.us / 1000) << 16 | 28672 | ((t.us % 1000) * 4096 / 1000))
               || substring(uuid_send(gen_random_uuid()) FROM 9),
               'hex')::uuid
      FROM (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS us) t
$$;
DO $$ BEGIN
    EXECUTE format('COMMENT ON FUNCTION %I.uuidv7() IS %L', current_schema(),
                   'Stampeded: UUID version 7, for a PostgreSQL before 18, whose pg_catalog has none');
END $$`,
  },
  {
    // The dedup key is a generated column, whose expression must be
    // immutable; date_trunc() with a time zone is from PostgreSQL 16 on
    // (the same result for the same arguments: the zone is one of them).
    // Before 16 the seed finds this one, which says so, through a search_path
    // that puts the schema before pg_catalog while the seed runs. An
    // immutable SQL function of one expression is inlined: the key costs
    // what it costs on 16.
    name: 'date_trunc',
    below: 160000,
    present: `SELECT provolatile = 'i' AS present FROM pg_proc WHERE oid = 'pg_catalog.date_trunc(text, timestamptz, text)'::regprocedure`,
    text: `
CREATE FUNCTION date_trunc(text, timestamptz, text) RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT pg_catalog.date_trunc($1, $2, $3)
$$;
-- Qualified: unqualified, date_trunc() is pg_catalog's.
DO $$ BEGIN
    EXECUTE format('COMMENT ON FUNCTION %I.date_trunc(text, timestamptz, text) IS %L', current_schema(),
                   'Stampeded: date_trunc() with a time zone, immutable as from PostgreSQL 16, for the dedup key''s generated column');
END $$`,
  },
];

/**
 * Once the server has its own uuidv7() (an install made before 18, on a
 * server since upgraded), the ids are drawn by it: the defaults that name the
 * install's function are pointed at pg_catalog's, and the install's function
 * goes when nothing else uses it. (The date_trunc() of an install made
 * before 16 stays: the dedup key's generated column names it, and it means
 * what the built-in one means.)
 */
const UUIDV7_TO_BUILT_IN = `
DO $$
BEGIN
    ALTER TABLE stampeded_jobs ALTER COLUMN id SET DEFAULT pg_catalog.uuidv7();
    ALTER TABLE stampeded_workers ALTER COLUMN id SET DEFAULT pg_catalog.uuidv7();
    BEGIN
        -- Qualified: unqualified, uuidv7() is pg_catalog's now.
        EXECUTE format('DROP FUNCTION %I.uuidv7()', current_schema());
    EXCEPTION WHEN dependent_objects_still_exist THEN
        NULL;  -- a table of the user's own draws from it: it stays
    END;
END $$`;

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

const CREATE_MIGRATIONS_TABLE = `
CREATE TABLE IF NOT EXISTS stampeded_schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`;

// server_version_num: the server the function's form was chosen for (NULL
// on a row recorded before forms were chosen by version).
const CREATE_FUNCTIONS_TABLE = `
CREATE TABLE IF NOT EXISTS stampeded_schema_functions (
    name       text        PRIMARY KEY,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    server_version_num integer
);
ALTER TABLE stampeded_schema_functions ADD COLUMN IF NOT EXISTS server_version_num integer`;

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
    await run(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(options.schema)}`);
    // Local to the transaction: the seed creates its objects unqualified.
    await run(`SELECT set_config('search_path', $1, true)`, [quoteIdent(options.schema)]);
  }
  const [{ schema }] = await run(`SELECT current_schema() AS schema`);
  if (schema == null) throw new StampededConfigError(NO_CURRENT_SCHEMA());
  await run(`SELECT pg_advisory_xact_lock(hashtextextended('stampeded.migrate.' || current_schema(), 0))`);
  await run(CREATE_MIGRATIONS_TABLE);
  await run(RENUMBER[0], [ABSORBED_MIGRATIONS]);
  await run(RENUMBER[1], [MIGRATION_FILES.map((m) => m.version), MIGRATION_FILES.map((m) => m.name)]);
  await run(RENUMBER[2]);
  const done = new Set((await run(`SELECT version FROM stampeded_schema_migrations`)).map((r) => Number(r.version)));
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
    await run(`INSERT INTO stampeded_schema_migrations (version, name) VALUES ($1, $2)`, [migration.version, migration.name]);
    done.add(migration.version);
    applied.migrations.push(migration);
    options.onApplied?.(migration);
  }
  if (MIGRATION_FILES.every((m) => done.has(m.version))) applied.functions = await applyFunctions(run, serverVersionNum);
  if (applied.migrations.length || applied.functions.length) await run(PIN_SEARCH_PATH);
  return applied;
}

/**
 * Runs the seed, verbatim, into the current schema. Before 18 its SQL
 * functions that use RETURNING OLD/NEW cannot be parsed: they are created
 * unchecked, as pg_dump restores them, and replaced by their function
 * files' forms for the server (stampeded_complete.pre18.sql, ...). The
 * schema goes before pg_catalog meanwhile, so that the seed finds COMPAT's
 * date_trunc(). `withCompat` first makes what COMPAT lists for the server,
 * unrecorded: the reference build adoption compares an install with.
 */
async function runSeed(run: SqlRunner, serverVersionNum: number, withCompat = false): Promise<void> {
  if (serverVersionNum >= PG18) {
    await run(migrationSql(MIGRATION_FILES[0].file));
    return;
  }
  if (withCompat) for (const c of COMPAT) if (serverVersionNum < c.below) await run(c.text);
  const [previous] = await run(
    `SELECT current_setting('check_function_bodies') AS checks, current_setting('search_path') AS path,
            set_config('check_function_bodies', 'off', true),
            set_config('search_path', quote_ident(current_schema()) || ', pg_catalog', true)`,
  );
  await run(migrationSql(MIGRATION_FILES[0].file));
  await run(`SELECT set_config('check_function_bodies', $1, true), set_config('search_path', $2, true)`, [previous.checks, previous.path]);
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
  await run(`INSERT INTO stampeded_schema_migrations (version, name) VALUES ($1, $2)`, [seed.version, seed.name]);
  done.add(seed.version);
  return seed;
}

/**
 * Makes what the seed needs and the server lacks (COMPAT), once, where the
 * seed is not applied yet; and where the server has since gained uuidv7()
 * (an upgrade to 18), switches the ids to the built-in one.
 */
async function provideCompat(run: SqlRunner, serverVersionNum: number, seeded: boolean, assumed: boolean): Promise<void> {
  const recorded = new Set((await run(`SELECT name FROM stampeded_schema_functions`)).map((r) => String(r.name)));
  for (const c of COMPAT) {
    if (seeded || serverVersionNum >= c.below) continue;
    const [{ present }] = await run(c.present);
    const [{ own }] = await run(`SELECT EXISTS (SELECT 1 FROM pg_proc WHERE proname = $1 AND pronamespace = current_schema()::regnamespace) AS own`, [c.name]);
    if ((present && !assumed) || own) continue;
    await run(c.text);
    await run(`INSERT INTO stampeded_schema_functions (name, checksum, server_version_num) VALUES ($1, $2, $3)`, [
      c.name,
      checksumOf(c.text),
      serverVersionNum,
    ]);
  }
  if (seeded && serverVersionNum >= PG18 && recorded.has('uuidv7')) {
    await run(UUIDV7_TO_BUILT_IN);
    await run(`DELETE FROM stampeded_schema_functions WHERE name = 'uuidv7'`);
  }
}

/**
 * Creates or replaces each function whose form for this server differs from
 * what the install recorded: a changed file, or a server whose version now
 * takes another form. Bodies are not checked at creation (as pg_dump
 * restores them): a function may call one whose file sorts after its own.
 */
async function applyFunctions(run: SqlRunner, serverVersionNum: number): Promise<string[]> {
  const recorded = new Map((await run(`SELECT name, checksum FROM stampeded_schema_functions`)).map((r) => [r.name, r.checksum]));
  const forms = functionFilesFor(serverVersionNum);
  // Chosen again for this server, the same form or another.
  await run(
    `UPDATE stampeded_schema_functions SET server_version_num = $1
      WHERE name = ANY($2::text[]) AND server_version_num IS DISTINCT FROM $1`,
    [serverVersionNum, forms.map((f) => f.name)],
  );
  const changed = forms.filter((f) => recorded.get(f.name) !== f.checksum);
  if (!changed.length) return [];
  const [{ previous }] = await run(`SELECT current_setting('check_function_bodies') AS previous`);
  await run(`SELECT set_config('check_function_bodies', 'off', true)`);
  for (const f of changed) {
    await run(f.text);
    await run(
      `INSERT INTO stampeded_schema_functions (name, checksum, server_version_num) VALUES ($1, $2, $3)
       ON CONFLICT (name) DO UPDATE SET checksum = excluded.checksum, server_version_num = excluded.server_version_num, applied_at = now()`,
      [f.name, f.checksum, serverVersionNum],
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
  const [{ present, functions, num }] = await run(
    `SELECT to_regclass($1) IS NOT NULL AS present, to_regclass($2) IS NOT NULL AS functions,
            current_setting('server_version_num')::int AS num`,
    [`${quoteIdent(schema)}.stampeded_schema_migrations`, `${quoteIdent(schema)}.stampeded_schema_functions`],
  );
  if (!present) return null;
  const names = new Set((await run(`SELECT name FROM ${quoteIdent(schema)}.stampeded_schema_migrations`)).map((r) => String(r.name)));
  if (!names.has('seed')) return null;
  const recorded = functions
    ? new Map((await run(`SELECT name, checksum FROM ${quoteIdent(schema)}.stampeded_schema_functions`)).map((r) => [r.name, r.checksum]))
    : new Map();
  return {
    migrations: MIGRATION_FILES.filter((m) => !names.has(m.name)),
    functions: loadFunctionFiles()
      .filter((f) => !runsOn(f, recorded.get(f.name), Number(num)))
      .map((f) => f.name),
  };
}
