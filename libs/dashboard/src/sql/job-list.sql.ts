import { sealedKeyIdSql, sql, type Statement } from '@stampeded/nestjs/internal';

/**
 * The columns a list row shows; the full row is for the detail page only.
 * args_key_id: the key encrypted args are under, or NULL (docs/encryption.md).
 */
const LIST_COLUMNS = `j.id::text AS id, j.queue, j.task, j.state, j.priority, j.attempt, j.max_attempts, j.tenant_id,
       j.destination, j.scheduled_at, j.inserted_at, j.claimed_at, j.finished_at, j.failure_kind, left(j.last_error, 300) AS last_error,
       j.source_queue, j.dead_letter_queue, ${sealedKeyIdSql('j.args')} AS args_key_id`;

/** The same columns as the scan reads them: as stored, converted only for the rows a page keeps. */
const SCANNED_COLUMNS = `j.id, j.queue, j.task, j.state, j.priority, j.attempt, j.max_attempts, j.tenant_id,
       j.destination, j.scheduled_at, j.inserted_at, j.claimed_at, j.finished_at, j.failure_kind, j.last_error,
       j.source_queue, j.dead_letter_queue, j.args, j.meta, j.error_fingerprint`;

/**
 * What the jobs list is filtered by, checked and normalised
 * (job-search.ts): each by equality, but the id's tail (its last hex
 * characters, as the list shows them), the error fingerprint (a prefix of
 * its hex), and args and meta (a JSON object they contain, jsonb @>).
 */
export interface JobFilters {
  queue?: string;
  state?: string;
  task?: string;
  tenant?: string;
  destination?: string;
  /** A whole job id. */
  id?: string;
  /** The last hex characters of a job's id, lower case. */
  idTail?: string;
  /** The error fingerprint's first hex characters, lower case: 8 to 64 of them. */
  fingerprint?: string;
  /** A JSON object, as text, that the job's args contain. */
  args?: string;
  /** A JSON object, as text, that the job's meta contains. */
  meta?: string;
  /** The last row of the previous page, or where the previous page's scan stopped; with its fingerprint, for a listing in fingerprint order. */
  after?: { queue: string; id: string; fingerprint?: string };
}

/** Jobs a bounded scan reads per page unless told otherwise, and the most it may be told. */
export const DEFAULT_SCAN = 20_000;
export const MAX_SCAN = 100_000;

const listVariants = new Map<string, Statement>();

const STATE_INDEX_PREDICATE: Record<string, string> = {
  available: `j.state IN ('available', 'retryable')`,
  retryable: `j.state IN ('available', 'retryable')`,
  claimed: `j.state IN ('claimed', 'executing')`,
  executing: `j.state IN ('claimed', 'executing')`,
};

/**
 * Whether these filters are answered by a bounded scan: a filter that no
 * index serves (a task, an id's tail, args or meta containing a value)
 * with none that an index narrows (a tenant, a destination, an error
 * fingerprint, a waiting or running state). No index leads with the task --
 * one on (task, queue, id) would be written by every insert, claim and
 * completion (migration 4's notes have its cost) -- nor covers args, meta
 * or the end of an id, and a GIN index on args would cost every enqueue
 * more than the task's would. Walking the primary key until a page matches
 * reads the whole table for a rare match, more as the table grows (NOTES.md,
 * "The dashboard's queries"). A task with a queue reads the queue's
 * partition as before; an id's tail, args or meta are a bounded scan
 * within the queue too, since any of them can match nothing in a queue of
 * a million jobs.
 */
export function isBoundedScan(filters: JobFilters): boolean {
  const byContent = filters.idTail !== undefined || filters.args !== undefined || filters.meta !== undefined || filters.fingerprint !== undefined;
  const unindexed = byContent || filters.task !== undefined;
  const narrowed =
    filters.id !== undefined ||
    filters.tenant !== undefined ||
    filters.destination !== undefined ||
    isFailingByFingerprint(filters) ||
    (filters.state !== undefined && filters.state in STATE_INDEX_PREDICATE);
  return unindexed && !narrowed && (filters.queue === undefined || byContent);
}

/** The states of the jobs failing now, which stampeded_jobs_failing_idx holds (migration 4). */
const FAILING_STATES = ['retryable', 'discarded'];

/**
 * Whether a fingerprint search reads the jobs failing with that error now
 * (retrying or discarded, the jobs the errors page counts) through
 * stampeded_jobs_failing_idx, in its order: (error_fingerprint, id). Only
 * that index has the id beside the fingerprint; the seed's fingerprint
 * index also holds every job that failed once and recovered, in heap order,
 * and a common error's jobs read from it and sorted cost hundreds of
 * milliseconds on a million jobs. A fingerprint with another state (jobs
 * that recovered from the error) is a bounded scan instead.
 */
export function isFailingByFingerprint(filters: JobFilters): boolean {
  return (
    filters.fingerprint !== undefined &&
    filters.id === undefined &&
    filters.tenant === undefined &&
    filters.destination === undefined &&
    (filters.state === undefined || FAILING_STATES.includes(filters.state))
  );
}

/** A fingerprint's prefix as the range of the bytea index's keys it covers: every fingerprint that starts with it. */
export function fingerprintRange(prefix: string): [string, string] {
  return [prefix.padEnd(64, '0'), prefix.padEnd(64, 'f')];
}

/**
 * The predicates of the filters that are not the scan's range: each adds
 * its clause, its value and its name (the prepared variant's name).
 */
function predicates(filters: JobFilters, values: unknown[], names: string[], where: string[]): void {
  const add = (name: string, clause: (n: number) => string, value: unknown) => {
    values.push(value);
    where.push(clause(values.length));
    names.push(name);
  };
  // A whole id: the primary key by its second column, which PostgreSQL 18 skip-scans over the few queues.
  if (filters.id !== undefined) add('id', (n) => `j.id = $${n}::uuid`, filters.id);
  if (filters.state !== undefined) add('state', (n) => `j.state = $${n}`, filters.state);
  if (filters.task !== undefined) add('task', (n) => `j.task = $${n}`, filters.task);
  if (filters.tenant !== undefined) add('tenant', (n) => `j.tenant_id = $${n}`, filters.tenant);
  if (filters.destination !== undefined) add('destination', (n) => `j.destination = $${n}`, filters.destination);
  if (filters.fingerprint !== undefined) {
    const [low, high] = fingerprintRange(filters.fingerprint);
    values.push(low);
    add('fingerprint', (n) => `j.error_fingerprint BETWEEN decode($${n - 1}, 'hex') AND decode($${n}, 'hex')`, high);
  }
  // The id as text ends with the tail: its last characters, which UUIDv7
  // draws at random, are what tells two jobs made the same minute apart.
  if (filters.idTail !== undefined) add('idtail', (n) => `j.id::text LIKE '%' || $${n}`, filters.idTail);
  if (filters.args !== undefined) add('args', (n) => `j.args @> $${n}::jsonb`, filters.args);
  if (filters.meta !== undefined) add('meta', (n) => `j.meta @> $${n}::jsonb`, filters.meta);
}

/**
 * The jobs list for one combination of filters, with its values. Built per
 * combination, not as one statement with `$1 IS NULL OR queue = $1` arms: a
 * prepared statement's generic plan cannot prune partitions or pick the
 * tenant and destination indexes through an OR, and Postgres switches to the
 * generic plan after five executions. Each variant is named for its filters,
 * so each is prepared once per connection.
 *
 * Keyset pagination on the primary key (queue, id), newest first within a
 * queue: the next page starts strictly after the last row seen, so a page
 * deep in a million rows costs what the first page costs. No OFFSET, no count.
 * A tenant or destination filter reads its own partial index and sorts
 * what it matched: cheap for one tenant's page, and the price of
 * not keeping a third index per filter on the busiest table. Filters that
 * have no index (isBoundedScan) are a bounded scan: boundedScanQuery.
 *
 * `limit` is the rows to fetch: the page's size and one more, which says
 * whether there is a next page.
 */
export function listJobsQuery(
  filters: JobFilters,
  limit: number,
  scan: number = DEFAULT_SCAN,
): { statement: Statement; values: unknown[]; scan: number | null } {
  if (isBoundedScan(filters)) return { ...boundedScanQuery(filters, limit, scan), scan };
  if (isFailingByFingerprint(filters)) return { ...failingByFingerprintQuery(filters, limit), scan: null };
  const where: string[] = [];
  const values: unknown[] = [];
  const names: string[] = [];
  if (filters.queue !== undefined) {
    values.push(filters.queue);
    where.push(`j.queue = $${values.length}`);
    names.push('queue');
  }
  predicates(filters, values, names, where);
  // Restating the state as the partial indexes' own predicate lets the
  // planner read a rare state (retryable, executing) from the claim or
  // claimed_by index instead of walking the primary key past a million
  // completed jobs; a common one still walks the key. The literal is in
  // the statement, so each state is its own prepared variant.
  const hint = filters.state !== undefined ? STATE_INDEX_PREDICATE[filters.state] : undefined;
  if (hint) {
    where.push(hint);
    names.push(filters.state!);
  }
  if (filters.after) {
    values.push(filters.after.queue, filters.after.id);
    where.push(`(j.queue, j.id) < ($${values.length - 1}::text, $${values.length}::uuid)`);
    names.push('after');
  }
  values.push(limit);
  const key = names.join(',') || 'all';
  let statement = listVariants.get(key);
  if (!statement) {
    const select = `SELECT ${LIST_COLUMNS}
         FROM stampeded_jobs j
        WHERE ${where.length ? where.join(' AND ') : 'true'}`;
    statement = sql(
      `dashboard_list_jobs:${key}`,
      filters.tenant !== undefined || filters.destination !== undefined
        ? // Fenced: left to itself the planner walks the primary key in
          // order and filters, betting a tenant's rows come early, and for a
          // rare tenant reads a large part of the table (NOTES.md, "The
          // dashboard's queries"). Its own index, then a sort, costs what
          // the tenant's size costs.
          `WITH matched AS MATERIALIZED (${select})
           SELECT * FROM matched j ORDER BY j.queue DESC, j.id::uuid DESC LIMIT $${values.length}`
        : `${select}
        -- The table's columns, not the output's: the output's id is text,
        -- and ordering by it sorts every matching row instead of reading
        -- the primary key backwards.
        ORDER BY j.queue DESC, j.id DESC
        LIMIT $${values.length}`,
    );
    listVariants.set(key, statement);
  }
  return { statement, values, scan: null };
}

/**
 * A page of a filter that has no index: the next `scan` jobs in the list's
 * own order (the primary key, backwards, from the cursor; within the queue
 * when one is given), of which those that match are kept, up to `limit`.
 * One backward walk of each partition's primary key (of the queue's alone),
 * merged, stopped by the inner LIMIT: at most `scan` index entries and heap
 * rows a page, however rare the match.
 *
 * Each row says whether it matched; the scan's last row also comes back,
 * matched or not, flagged `scan_end` (its row_number is the budget), so that
 * a page that ran out of budget before it filled can hand on a cursor from
 * where the scan stopped rather than from its last match. The row number is
 * counted as the rows stream past, in the order the key gives them: no sort,
 * nothing held.
 */
function boundedScanQuery(filters: JobFilters, limit: number, scan: number): { statement: Statement; values: unknown[] } {
  const values: unknown[] = [scan, limit];
  const names: string[] = [];
  const range: string[] = [];
  if (filters.queue !== undefined) {
    values.push(filters.queue);
    range.push(`j.queue = $${values.length}`);
    names.push('queue');
  }
  if (filters.after) {
    values.push(filters.after.queue, filters.after.id);
    range.push(`(j.queue, j.id) < ($${values.length - 1}::text, $${values.length}::uuid)`);
    names.push('after');
  }
  const matched: string[] = [];
  predicates(filters, values, names, matched);
  const key = `scan:${names.join(',')}`;
  // Within one queue the key's order is the id's: said so, or the planner,
  // which drops the constant queue from the scan's order, sorts the matches.
  const order = filters.queue !== undefined ? 'j.id DESC' : 'j.queue DESC, j.id DESC';
  let statement = listVariants.get(key);
  if (!statement) {
    statement = sql(
      `dashboard_list_jobs:${key}`,
      `SELECT ${LIST_COLUMNS}, ${matched.join(' AND ')} AS matched, j.scanned = $1 AS scan_end
         FROM (SELECT ${SCANNED_COLUMNS}, row_number() OVER (ORDER BY ${order}) AS scanned
                 FROM stampeded_jobs j
                ${range.length ? `WHERE ${range.join(' AND ')}` : ''}
                ORDER BY ${order}
                LIMIT $1) j
        WHERE (${matched.join(' AND ')}) OR j.scanned = $1
        ORDER BY ${order}
        LIMIT $2`,
    );
    listVariants.set(key, statement);
  }
  return { statement, values };
}

/**
 * The jobs failing now with an error (isFailingByFingerprint), newest first
 * within each fingerprint the prefix covers: a backward read of
 * stampeded_jobs_failing_idx over the prefix's range, each partition's
 * merged, stopped by the LIMIT, and paged by (error_fingerprint, id). A
 * page costs what the first page costs, however many jobs have the error.
 */
function failingByFingerprintQuery(filters: JobFilters, limit: number): { statement: Statement; values: unknown[] } {
  const [low, high] = fingerprintRange(filters.fingerprint!);
  const values: unknown[] = [low, high];
  const where = [`j.error_fingerprint BETWEEN decode($1, 'hex') AND decode($2, 'hex')`, `j.state IN ('retryable', 'discarded')`];
  const names: string[] = [];
  if (filters.queue !== undefined) {
    values.push(filters.queue);
    where.push(`j.queue = $${values.length}`);
    names.push('queue');
  }
  const { fingerprint: _f, ...rest } = filters;
  predicates(rest, values, names, where);
  if (filters.after?.fingerprint) {
    values.push(filters.after.fingerprint, filters.after.id);
    where.push(`(j.error_fingerprint, j.id) < (decode($${values.length - 1}, 'hex'), $${values.length}::uuid)`);
    names.push('after');
  }
  values.push(limit);
  const key = `failing:${names.join(',')}`;
  let statement = listVariants.get(key);
  if (!statement) {
    statement = sql(
      `dashboard_list_jobs:${key}`,
      `SELECT ${LIST_COLUMNS}, encode(j.error_fingerprint, 'hex') AS fingerprint_order
         FROM stampeded_jobs j
        WHERE ${where.join(' AND ')}
        ORDER BY j.error_fingerprint DESC, j.id DESC
        LIMIT $${values.length}`,
    );
    listVariants.set(key, statement);
  }
  return { statement, values };
}
