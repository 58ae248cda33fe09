import { checksumOf } from './function-files.js';
import { MIGRATION_FILES, migrationSql } from './migration-files.js';
import {
  CREATE_DATE_TRUNC,
  CREATE_UUIDV7,
  DATE_TRUNC_IMMUTABLE,
  FORGET_OWN_UUIDV7,
  OWN_FUNCTION_EXISTS,
  RECORD_FUNCTION,
  RECORDED_FUNCTIONS,
  RESTORE_SEED_SETTINGS,
  SEED_SETTINGS_FOR_OLDER_SERVER,
  UUIDV7_BUILT_IN,
  UUIDV7_TO_BUILT_IN,
} from './runner.sql.js';
import type { SqlRunner } from './migrations.js';

/** PostgreSQL 18, the first with uuidv7() and RETURNING OLD/NEW. */
const PG18 = 180000;

/**
 * What the seed takes from PostgreSQL 18 (or 16) and an older server lacks,
 * made in the install's schema before the seed runs, each recorded in
 * stampeded_schema_functions under its name with the server it was made for.
 * Why each is made as it is: its file in runner/.
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
  { name: 'uuidv7', below: PG18, present: UUIDV7_BUILT_IN, text: CREATE_UUIDV7 },
  { name: 'date_trunc', below: 160000, present: DATE_TRUNC_IMMUTABLE, text: CREATE_DATE_TRUNC },
];

/**
 * Runs the seed, verbatim, into the current schema. Before 18 its SQL
 * functions that use RETURNING OLD/NEW cannot be parsed: they are created
 * unchecked, as pg_dump restores them, and replaced by their function
 * files' forms for the server (stampeded_complete.pre18.sql, ...). The
 * schema goes before pg_catalog meanwhile, so that the seed finds COMPAT's
 * date_trunc(). `withCompat` first makes what COMPAT lists for the server,
 * unrecorded: the reference build adoption compares an install with.
 */
export async function runSeed(run: SqlRunner, serverVersionNum: number, withCompat = false): Promise<void> {
  if (serverVersionNum >= PG18) {
    await run(migrationSql(MIGRATION_FILES[0].file));
    return;
  }
  if (withCompat) for (const c of COMPAT) if (serverVersionNum < c.below) await run(c.text);
  const [previous] = await run(SEED_SETTINGS_FOR_OLDER_SERVER);
  await run(migrationSql(MIGRATION_FILES[0].file));
  await run(RESTORE_SEED_SETTINGS, [previous.checks, previous.path]);
}

/**
 * Makes what the seed needs and the server lacks (COMPAT), once, where the
 * seed is not applied yet; and where the server has since gained uuidv7()
 * (an upgrade to 18), switches the ids to the built-in one. `assumed`: the
 * server's version is assumed (a test of an older server on a newer one), so
 * what the server has does not count.
 */
export async function provideCompat(run: SqlRunner, serverVersionNum: number, seeded: boolean, assumed: boolean): Promise<void> {
  const recorded = new Set((await run(RECORDED_FUNCTIONS)).map((r) => String(r.name)));
  for (const c of COMPAT) {
    if (seeded || serverVersionNum >= c.below) continue;
    const [{ present }] = await run(c.present);
    const [{ own }] = await run(OWN_FUNCTION_EXISTS, [c.name]);
    if ((present && !assumed) || own) continue;
    await run(c.text);
    await run(RECORD_FUNCTION, [c.name, checksumOf(c.text), serverVersionNum]);
  }
  if (seeded && serverVersionNum >= PG18 && recorded.has('uuidv7')) {
    await run(UUIDV7_TO_BUILT_IN);
    await run(FORGET_OWN_UUIDV7);
  }
}
