import { SEED_INSTALL_DIFFERS } from '../../stampeded.messages.js';
import { SeedMismatchError } from '../../errors/stampeded.errors.js';
import { quoteIdent } from '../statement.js';
import {
  CREATE_REFERENCE_QUEUE,
  CURRENT_SCHEMA,
  DESCRIBE_STAMPEDED_OBJECTS,
  ENTER_SCRATCH_SCHEMA,
  SEED_CHECK_RELEASE,
  SEED_CHECK_ROLLBACK,
  SEED_CHECK_SAVEPOINT,
  SET_LOCAL_SEARCH_PATH,
} from './runner.sql.js';
import type { SqlRunner } from './migrations.js';

/**
 * Adopting an install of the seed that another runtime made.
 *
 * Migration 1 is the "stampeded 0.3.1" schema verbatim, and runtimes in other
 * languages install it by running its SQL as-is: such a database holds the
 * seed's tables, functions and jobs, and no record of our migrations. Running
 * migration 1 there fails on its first CREATE TABLE. Instead, when migration
 * 1 is not recorded and the schema already holds stampeded_* objects, they
 * are compared with migration 1 as this server builds it; exactly equal, they
 * are recorded as migration 1 and the later migrations apply to them as to
 * any install of ours. Anything else is refused, naming each difference,
 * before anything is written.
 *
 * The reference is built, not shipped: migration 1 runs in a scratch schema
 * inside a savepoint that is rolled back, and both schemas are described by
 * the same catalog query. The catalog's text forms (defaults, constraint and
 * index definitions, NOT NULL constraints, which only PostgreSQL 18 lists as
 * constraints) differ between server versions, and so may the form migration
 * 1 takes on each; built on the server at hand, like is compared with like,
 * and there is no copy of the seed's shape to keep in step with its SQL.
 *
 * Not compared: storage parameters and UNLOGGED (the seed itself tells
 * operators to tune both), owners and grants, and the functions' settings
 * (the runner pins every function's search_path after it applies anything).
 * Every partition of stampeded_jobs for a queue must look like the one the
 * seed's stampeded_create_queue makes (its triggers, no constraint or index
 * of its own); the user's own objects whose names do not start with
 * "stampeded_" are not looked at.
 */

/** A queue whose partition the reference build makes with the seed's stampeded_create_queue, to compare each queue's partition with. */
const REFERENCE_QUEUE = 'stampeded_seed_reference';
const REFERENCE_PARTITION = `stampeded_jobs_${REFERENCE_QUEUE}`;

/** How many differences a refusal lists before it says how many more there are. */
const LISTED_DIFFERENCES = 25;

/** One row of DESCRIBE_STAMPEDED_OBJECTS (runner/describe_stampeded_objects.sql). */
export interface CatalogFact {
  kind: string;
  relation: string | null;
  name: string | null;
  /** A column's attnum: only the order of a table's columns means anything. */
  position: number | null;
  detail: string;
}

/**
 * Decides whether the schema in the search_path holds the seed installed by
 * someone else. Returns false when it holds nothing of Stampeded's (a new
 * install: migration 1 runs as usual), true when it holds exactly what
 * migration 1 makes (the caller records migration 1 without running it), and
 * throws SeedMismatchError, naming each difference, otherwise. Changes
 * nothing: everything it creates is rolled back. Called by applyMigrations()
 * under its lock, inside the caller's transaction, when migration 1 is not
 * recorded; `applySeed` applies migration 1 as the runner would, into the
 * search_path's schema.
 */
export async function seedInstalledByAnother(run: SqlRunner, applySeed: () => Promise<unknown>): Promise<boolean> {
  const [{ schema }] = await run(CURRENT_SCHEMA);
  // One savepoint for both descriptions: rolling back to it drops the
  // reference build and restores the search_path.
  await run(SEED_CHECK_SAVEPOINT);
  let found: CatalogFact[];
  let seed: CatalogFact[] = [];
  try {
    found = await describe(run, String(schema));
    if (found.length) {
      await run(ENTER_SCRATCH_SCHEMA);
      await applySeed();
      await run(CREATE_REFERENCE_QUEUE, [REFERENCE_QUEUE]);
      const [{ schema: scratch }] = await run(CURRENT_SCHEMA);
      seed = await describe(run, String(scratch));
    }
  } finally {
    await run(SEED_CHECK_ROLLBACK);
    await run(SEED_CHECK_RELEASE);
  }
  if (!found.length) return false;
  const differences = seedDifferences(seed, found);
  if (differences.length) throw new SeedMismatchError(SEED_INSTALL_DIFFERS(String(schema), differences, LISTED_DIFFERENCES), differences);
  return true;
}

/**
 * A schema's facts, read with the search_path set to it and then pg_catalog:
 * so that names in it print unqualified, a function of its own that has the
 * name and arguments of a built-in one included (before PostgreSQL 16, an
 * install makes its own date_trunc() for the seed's dedup key).
 */
async function describe(run: SqlRunner, schema: string): Promise<CatalogFact[]> {
  await run(SET_LOCAL_SEARCH_PATH, [`${quoteIdent(schema)}, pg_catalog`]);
  return (await run(DESCRIBE_STAMPEDED_OBJECTS)) as unknown as CatalogFact[];
}

/** A fact's name in a message, and the key that pairs it with its counterpart. */
function keyOf(f: CatalogFact): string {
  switch (f.kind) {
    case 'relation':
      return f.relation ? `${f.detail.startsWith('sequence') ? 'sequence' : f.detail.includes('view') ? 'view' : 'table'} ${f.relation}` : 'the table';
    case 'function':
    case 'type':
      return `${f.kind} ${f.name}`;
    case 'function body':
      return `function ${f.name} body`;
    default:
      return `${f.kind} ${f.relation ? `${f.relation}.` : ''}${f.name}`;
  }
}

const QUEUE_PARTITION = /, partition of stampeded_jobs FOR VALUES IN \(.*\)$/;

/** The partitions of stampeded_jobs for one queue each: the default partition is one of the seed's own tables. */
function queuePartitions(facts: CatalogFact[]): Set<string> {
  return new Set(facts.filter((f) => f.kind === 'relation' && QUEUE_PARTITION.test(f.detail)).map((f) => f.relation!));
}

/** A queue partition's facts with its name and bound taken out, so that every one compares with the reference. */
function asQueuePartition(f: CatalogFact): CatalogFact {
  return { ...f, relation: '', detail: f.detail.replace(QUEUE_PARTITION, ', partition of stampeded_jobs FOR VALUES IN (...)') };
}

/** What the install has that the seed does not, or lacks, or has otherwise, one line each, with the seed's and the install's definitions. */
export function seedDifferences(seed: CatalogFact[], found: CatalogFact[]): string[] {
  const seedQueues = queuePartitions(seed);
  const foundQueues = queuePartitions(found);
  const differences = compare(
    seed.filter((f) => !seedQueues.has(f.relation ?? '')),
    found.filter((f) => !foundQueues.has(f.relation ?? '')),
    '',
  );
  const reference = seed.filter((f) => f.relation === REFERENCE_PARTITION).map(asQueuePartition);
  for (const partition of [...foundQueues].sort()) {
    const facts = found.filter((f) => f.relation === partition).map(asQueuePartition);
    differences.push(...compare(reference, facts, `queue partition ${partition}: `));
  }
  return differences;
}

function compare(seed: CatalogFact[], found: CatalogFact[], prefix: string): string[] {
  const seedByKey = new Map(seed.map((f) => [keyOf(f), f]));
  const foundByKey = new Map(found.map((f) => [keyOf(f), f]));
  // A table or function missing (or extra) as a whole is one line, not one per column.
  const wholeMissing = new Set<string>();
  const wholeExtra = new Set<string>();
  for (const [key, f] of seedByKey) if (!foundByKey.has(key) && (f.kind === 'relation' || f.kind === 'function')) wholeMissing.add(owner(f));
  for (const [key, f] of foundByKey) if (!seedByKey.has(key) && (f.kind === 'relation' || f.kind === 'function')) wholeExtra.add(owner(f));
  const lines: string[] = [];
  for (const [key, f] of seedByKey) {
    const other = foundByKey.get(key);
    if (!other) {
      if (f.kind === 'relation' || f.kind === 'function' || !wholeMissing.has(owner(f))) lines.push(`${prefix}${key}: missing (the seed's: ${shown(f)})`);
    } else if (other.detail !== f.detail) {
      lines.push(
        f.kind === 'function body'
          ? `${prefix}function ${f.name}: its body differs from the seed's`
          : `${prefix}${key}: differs (the seed's: ${shown(f)}; found: ${shown(other)})`,
      );
    }
  }
  for (const [key, f] of foundByKey) {
    if (seedByKey.has(key)) continue;
    if (f.kind === 'relation' || f.kind === 'function' || !wholeExtra.has(owner(f))) lines.push(`${prefix}${key}: not in the seed (${shown(f)})`);
  }
  // The columns both have, in each one's order: a column missing or added is said above, once.
  const seedOrder = columnOrder(seed);
  const foundOrder = columnOrder(found);
  for (const [table, columns] of seedOrder) {
    const theirs = foundOrder.get(table);
    if (!theirs) continue;
    const ours = columns.filter((c) => theirs.includes(c));
    const inTheirOrder = theirs.filter((c) => columns.includes(c));
    if (ours.join() !== inTheirOrder.join()) {
      lines.push(`${prefix}table ${table}: columns in another order (the seed's: ${ours.join(', ')}; found: ${inTheirOrder.join(', ')})`);
    }
  }
  return lines;
}

function columnOrder(facts: CatalogFact[]): Map<string, string[]> {
  const order = new Map<string, CatalogFact[]>();
  for (const f of facts) if (f.kind === 'column') order.set(f.relation!, [...(order.get(f.relation!) ?? []), f]);
  return new Map([...order].map(([table, columns]) => [table, columns.sort((a, b) => a.position! - b.position!).map((c) => c.name!)]));
}

/** The table or function a fact belongs to. */
function owner(f: CatalogFact): string {
  return f.kind === 'function' || f.kind === 'function body' ? `function ${f.name}` : f.kind === 'type' ? `type ${f.name}` : `relation ${f.relation}`;
}

function shown(f: CatalogFact): string {
  if (f.kind === 'function body') return 'its body';
  const oneLine = f.detail.replace(/\s+/g, ' ');
  return oneLine.length > 300 ? `${oneLine.slice(0, 297)}...` : oneLine;
}
