import { readFileSync } from 'node:fs';
import { quoteIdent } from '../statement.js';

// The statements the migration runner runs besides the migrations and the
// function files: its bookkeeping, what an older server needs, and adoption.
// The longer bodies are .sql files in runner/, beside this file. Each runs
// inside the caller's transaction, unqualified: the search_path is the
// install's schema.

const body = (file: string) => readFileSync(new URL(`./runner/${file}`, import.meta.url), 'utf8');

export const CREATE_MIGRATIONS_TABLE = body('schema_migrations.sql');
export const CREATE_FUNCTIONS_TABLE = body('schema_functions.sql');
export const PIN_SEARCH_PATH = body('pin_search_path.sql');

// --- the server and the schema ---------------------------------------------

export const SERVER_VERSION = `SELECT current_setting('server_version_num')::int AS num, current_setting('server_version') AS version`;

export const CURRENT_SCHEMA = `SELECT current_schema() AS schema`;

export const createSchema = (schema: string) => `CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`;

/** Local to the transaction. $1: the search_path, its names quoted. */
export const SET_LOCAL_SEARCH_PATH = `SELECT set_config('search_path', $1, true)`;

/** One migrating process a schema at a time: the others wait, then find the work done. */
export const LOCK_SCHEMA_FOR_MIGRATION = `SELECT pg_advisory_xact_lock(hashtextextended('stampeded.migrate.' || current_schema(), 0))`;

// --- the numbered migrations' record ----------------------------------------

/** $1: names of migrations that others replaced whole (migration-files.ts, ABSORBED_MIGRATIONS). */
export const FORGET_ABSORBED_MIGRATIONS = `DELETE FROM stampeded_schema_migrations WHERE name = ANY($1::text[])`;

/**
 * Renumbers, by name, through negative versions so that no two rows share a
 * version on the way; NEGATED_VERSIONS_BACK then makes them positive.
 * $1: versions, $2: names.
 */
export const RENUMBER_BY_NAME = `UPDATE stampeded_schema_migrations m SET version = -c.version
  FROM unnest($1::int[], $2::text[]) AS c (version, name)
 WHERE m.name = c.name AND m.version <> c.version`;

export const NEGATED_VERSIONS_BACK = `UPDATE stampeded_schema_migrations SET version = -version WHERE version < 0`;

export const RECORDED_VERSIONS = `SELECT version FROM stampeded_schema_migrations`;

export const RECORD_MIGRATION = `INSERT INTO stampeded_schema_migrations (version, name) VALUES ($1, $2)`;

// --- the functions' record ---------------------------------------------------

export const RECORDED_FUNCTIONS = `SELECT name, checksum FROM stampeded_schema_functions`;

/** A function's form chosen again for this server: $1 server_version_num, $2 the names. */
export const RECHOOSE_FORMS = `UPDATE stampeded_schema_functions SET server_version_num = $1
 WHERE name = ANY($2::text[]) AND server_version_num IS DISTINCT FROM $1`;

/** $1 name, $2 checksum, $3 server_version_num. */
export const RECORD_FUNCTION = `INSERT INTO stampeded_schema_functions (name, checksum, server_version_num) VALUES ($1, $2, $3)
ON CONFLICT (name) DO UPDATE SET checksum = excluded.checksum, server_version_num = excluded.server_version_num, applied_at = now()`;

export const FUNCTION_BODY_CHECKS = `SELECT current_setting('check_function_bodies') AS previous`;

/** $1: 'off' while functions that call each other are created, then what it was. */
export const SET_FUNCTION_BODY_CHECKS = `SELECT set_config('check_function_bodies', $1, true)`;

// --- what an older server lacks (server-compat.ts) ---------------------------

export const CREATE_UUIDV7 = body('uuidv7.sql');
export const UUIDV7_BUILT_IN = `SELECT to_regprocedure('pg_catalog.uuidv7()') IS NOT NULL AS present`;
export const UUIDV7_TO_BUILT_IN = body('uuidv7_to_built_in.sql');
export const FORGET_OWN_UUIDV7 = `DELETE FROM stampeded_schema_functions WHERE name = 'uuidv7'`;

export const CREATE_DATE_TRUNC = body('date_trunc.sql');
export const DATE_TRUNC_IMMUTABLE = `SELECT provolatile = 'i' AS present FROM pg_proc WHERE oid = 'pg_catalog.date_trunc(text, timestamptz, text)'::regprocedure`;

/** $1: a function name; whether the install's schema has one of that name. */
export const OWN_FUNCTION_EXISTS = `SELECT EXISTS (SELECT 1 FROM pg_proc WHERE proname = $1 AND pronamespace = current_schema()::regnamespace) AS own`;

/**
 * Before 18 the seed's functions that use RETURNING OLD/NEW cannot be
 * parsed, and before 16 it needs the schema's date_trunc(): the seed runs
 * with body checks off and the schema before pg_catalog, and the settings are
 * restored after (RESTORE_SEED_SETTINGS, with what this returns).
 */
export const SEED_SETTINGS_FOR_OLDER_SERVER = `SELECT current_setting('check_function_bodies') AS checks, current_setting('search_path') AS path,
       set_config('check_function_bodies', 'off', true),
       set_config('search_path', quote_ident(current_schema()) || ', pg_catalog', true)`;

export const RESTORE_SEED_SETTINGS = `SELECT set_config('check_function_bodies', $1, true), set_config('search_path', $2, true)`;

// --- an install, read from outside its schema (pendingChanges) ---------------

/** $1, $2: the install's two record tables, schema-qualified. */
export const INSTALL_RECORDS = `SELECT to_regclass($1) IS NOT NULL AS present, to_regclass($2) IS NOT NULL AS functions,
       current_setting('server_version_num')::int AS num`;

/** $1: a schema; whether it holds the seed's jobs table, recorded by our migrations or not. */
export const SEED_TABLES_PRESENT = `SELECT to_regclass(format('%I.stampeded_jobs', $1::text)) IS NOT NULL AS present`;

export const recordedMigrationNamesIn = (schema: string) => `SELECT name FROM ${quoteIdent(schema)}.stampeded_schema_migrations`;

export const recordedFunctionsIn = (schema: string) => `SELECT name, checksum FROM ${quoteIdent(schema)}.stampeded_schema_functions`;

// --- adopting a seed another runtime installed (seed-adoption.ts) -----------

export const DESCRIBE_STAMPEDED_OBJECTS = body('describe_stampeded_objects.sql');
export const ENTER_SCRATCH_SCHEMA = body('enter_scratch_schema.sql');
export const SEED_CHECK_SAVEPOINT = `SAVEPOINT stampeded_seed_check`;
export const SEED_CHECK_ROLLBACK = `ROLLBACK TO SAVEPOINT stampeded_seed_check`;
export const SEED_CHECK_RELEASE = `RELEASE SAVEPOINT stampeded_seed_check`;
/** $1: the reference queue, made by the seed's own function. */
export const CREATE_REFERENCE_QUEUE = `SELECT stampeded_create_queue($1)`;
