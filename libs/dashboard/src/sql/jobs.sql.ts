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
       j.source_queue, j.dead_letter_queue, j.args`;

export interface JobFilters {
  queue?: string;
  state?: string;
  task?: string;
  tenant?: string;
  destination?: string;
  /** The last row of the previous page, or where the previous page's scan stopped. */
  after?: { queue: string; id: string };
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
 * Whether these filters are answered by a bounded scan: a task, alone or
 * with a state that no partial index holds (completed, discarded,
 * cancelled). No index leads with the task -- one on (task, queue, id) would
 * be written by every insert, claim and completion (migration 4's notes have
 * its cost) -- and walking the primary key until a page matches reads every
 * other queue's partition to its end for a task that lives in one queue,
 * more as the table grows (NOTES.md, "The dashboard's queries"). A queue,
 * tenant, destination or indexed state reads its own index.
 */
export function isBoundedScan(filters: JobFilters): boolean {
  return (
    filters.task !== undefined &&
    filters.queue === undefined &&
    filters.tenant === undefined &&
    filters.destination === undefined &&
    (filters.state === undefined || !(filters.state in STATE_INDEX_PREDICATE))
  );
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
 * A tenant or destination filter reads its own partial index and sorts what
 * it matched: cheap for one tenant's page, and the price of not keeping a
 * third index per filter on the busiest table. Filters that have no index
 * (a task, see isBoundedScan) are a bounded scan: boundedScanQuery.
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
  const where: string[] = [];
  const values: unknown[] = [];
  const names: string[] = [];
  const add = (name: string, clause: (n: number) => string, value: unknown) => {
    values.push(value);
    where.push(clause(values.length));
    names.push(name);
  };
  if (filters.queue !== undefined) add('queue', (n) => `j.queue = $${n}`, filters.queue);
  if (filters.state !== undefined) {
    add('state', (n) => `j.state = $${n}`, filters.state);
    // Restating the state as the partial indexes' own predicate lets the
    // planner read a rare state (retryable, executing) from the claim or
    // claimed_by index instead of walking the primary key past a million
    // completed jobs; a common one still walks the key. The literal is in
    // the statement, so each state is its own prepared variant.
    const hint = STATE_INDEX_PREDICATE[filters.state];
    if (hint) {
      where.push(hint);
      names.push(filters.state);
    }
  }
  if (filters.task !== undefined) add('task', (n) => `j.task = $${n}`, filters.task);
  if (filters.tenant !== undefined) add('tenant', (n) => `j.tenant_id = $${n}`, filters.tenant);
  if (filters.destination !== undefined) add('destination', (n) => `j.destination = $${n}`, filters.destination);
  if (filters.after) {
    values.push(filters.after.queue);
    add('after', (n) => `(j.queue, j.id) < ($${n - 1}::text, $${n}::uuid)`, filters.after.id);
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
 * own order (the primary key, backwards, from the cursor), of which those
 * that match are kept, up to `limit`. One backward walk of each partition's
 * primary key, merged, stopped by the inner LIMIT: at most `scan` index
 * entries and heap rows a page, however rare the task.
 *
 * Each row says whether it matched; the scan's last row also comes back,
 * matched or not, flagged `scan_end` (its row_number is the budget), so that
 * a page that ran out of budget before it filled can hand on a cursor from
 * where the scan stopped rather than from its last match. The row number is
 * counted as the rows stream past, in the order the key gives them: no sort,
 * nothing held.
 */
function boundedScanQuery(filters: JobFilters, limit: number, scan: number): { statement: Statement; values: unknown[] } {
  const values: unknown[] = [filters.task, scan, limit];
  const names = ['task'];
  const matched = ['j.task = $1'];
  if (filters.state !== undefined) {
    values.push(filters.state);
    matched.push(`j.state = $${values.length}`);
    names.push('state');
  }
  let after = '';
  if (filters.after) {
    values.push(filters.after.queue, filters.after.id);
    after = `WHERE (j.queue, j.id) < ($${values.length - 1}::text, $${values.length}::uuid)`;
    names.push('after');
  }
  const key = `scan:${names.join(',')}`;
  let statement = listVariants.get(key);
  if (!statement) {
    statement = sql(
      `dashboard_list_jobs:${key}`,
      `SELECT ${LIST_COLUMNS}, ${matched.join(' AND ')} AS matched, j.scanned = $2 AS scan_end
         FROM (SELECT ${SCANNED_COLUMNS}, row_number() OVER (ORDER BY j.queue DESC, j.id DESC) AS scanned
                 FROM stampeded_jobs j
                ${after}
                ORDER BY j.queue DESC, j.id DESC
                LIMIT $2) j
        WHERE (${matched.join(' AND ')}) OR j.scanned = $2
        ORDER BY j.queue DESC, j.id DESC
        LIMIT $3`,
    );
    listVariants.set(key, statement);
  }
  return { statement, values };
}

/**
 * One job by id. With its queue the primary key answers directly; without it
 * PostgreSQL 18 skip-scans the primary key (queue, id) over its few distinct
 * queues rather than reading every row.
 */
export const GET_JOB = sql(
  'dashboard_get_job',
  `SELECT *, id::text AS id, claimed_by::text AS claimed_by, source_id::text AS source_id,
          encode(error_fingerprint, 'hex') AS error_fingerprint
     FROM stampeded_jobs
    WHERE id = $1::uuid AND ($2::text IS NULL OR queue = $2)`,
);

export const RETRY_JOB = sql('dashboard_retry_job', `SELECT was, now_state, queue FROM stampeded_retry($1::uuid, $2::text)`);

export const CANCEL_JOB = sql('dashboard_cancel_job', `SELECT was, now_state, queue FROM stampeded_cancel($1::uuid, $2::text)`);

/** An operator's discard of a waiting job (functions/stampeded_discard.sql); $3 is the error it records. */
export const DISCARD_JOB = sql('dashboard_discard_job', `SELECT was, now_state, queue FROM stampeded_discard($1::uuid, $2::text, $3::text)`);

/**
 * Errors grouped by fingerprint (the schema's normalised hash of the message),
 * over jobs that are failing now: retrying or discarded.
 *
 * Counted from stampeded_jobs_failing_idx (migration 4) alone: it holds only
 * failing jobs, with every column the groups are made of, so the groups come
 * from an index-only scan; then each of the page's groups takes its newest
 * job as its example, one descent of the same index each. Read through the
 * seed's fingerprint index, which has none of those columns, the page would
 * visit the heap once per failing job (NOTES.md, "The dashboard's queries").
 */
export const ERRORS_BY_FINGERPRINT = sql(
  'dashboard_errors_by_fingerprint',
  `WITH groups AS (
       SELECT error_fingerprint,
              count(*) AS jobs,
              count(*) FILTER (WHERE state = 'retryable') AS retrying,
              count(*) FILTER (WHERE state = 'discarded') AS discarded,
              array_agg(DISTINCT queue ORDER BY queue) AS queues,
              array_agg(DISTINCT task ORDER BY task) AS tasks,
              array_agg(DISTINCT failure_kind ORDER BY failure_kind) AS failure_kinds
         FROM stampeded_jobs
        WHERE error_fingerprint IS NOT NULL
          AND state IN ('retryable', 'discarded')
          AND ($1::text IS NULL OR queue = $1)
        GROUP BY error_fingerprint
        ORDER BY count(*) DESC
        LIMIT $2
   )
   SELECT encode(g.error_fingerprint, 'hex') AS fingerprint,
          g.jobs::bigint AS jobs, g.retrying::bigint AS retrying, g.discarded::bigint AS discarded,
          g.queues, g.tasks, g.failure_kinds,
          e.id::text AS example_id, e.queue AS example_queue, e.last_error AS example_error
     FROM groups g
     LEFT JOIN LATERAL (
          SELECT j.id, j.queue, j.last_error FROM stampeded_jobs j
           WHERE j.error_fingerprint = g.error_fingerprint
             AND j.state IN ('retryable', 'discarded')
             AND ($1::text IS NULL OR j.queue = $1)
           ORDER BY j.id DESC
           LIMIT 1) e ON true
    ORDER BY g.jobs DESC, g.error_fingerprint`,
);

/**
 * Jobs finished per minute over the last `$1` minutes, all queues and
 * outcomes together; a minute in which none finished has no row.
 *
 * Each minute is its own count over a range of the seed's finished_at
 * partial index, an index-only scan where the visibility map allows. One
 * GROUP BY over the hour reads the same index once, but puts every entry
 * through date_bin() and a hash table, at several times the cost of sixty
 * range counts (NOTES.md, "The dashboard's queries"). Split by queue and
 * outcome, the chart would read every row of the hour from the heap, or need
 * (finished_at, queue, state) in an index that every completion writes,
 * which the chart does not pay for.
 */
export const THROUGHPUT = sql(
  'dashboard_throughput',
  `SELECT extract(epoch FROM m.minute)::bigint AS bucket, c.n
     FROM generate_series(date_trunc('minute', now()) - make_interval(mins => $1::int - 1),
                          date_trunc('minute', now()), interval '1 minute') AS m(minute)
    CROSS JOIN LATERAL (
          SELECT count(*)::bigint AS n FROM stampeded_jobs
           WHERE finished_at IS NOT NULL
             AND finished_at >= m.minute AND finished_at < m.minute + interval '1 minute') c
    WHERE c.n > 0`,
);

/**
 * The jobs a bulk action applies to: those matching the list's filters, in
 * an eligible state, after a keyset cursor, in id order, one batch at a time.
 * Each filter is a fixed predicate that a NULL parameter switches off.
 */
const BULK_BATCH = `SELECT j.id, j.queue FROM stampeded_jobs j
    WHERE j.state = ANY($1::text[])
      AND ($2::text IS NULL OR j.queue = $2)
      AND ($3::text IS NULL OR j.task = $3)
      AND ($4::text IS NULL OR j.tenant_id = $4)
      AND ($5::text IS NULL OR j.destination = $5)
      AND ($6::uuid IS NULL OR j.id > $6)
    ORDER BY j.id
    LIMIT $7`;

/** How many jobs a bulk action would touch, counted up to a cap ($7). */
export const BULK_COUNT = sql('dashboard_bulk_count', `SELECT count(*)::int AS matched FROM (${BULK_BATCH}) b`);

/** One batch of a bulk retry, through the same function a single retry uses. */
export const BULK_RETRY = sql(
  'dashboard_bulk_retry',
  `SELECT b.id::text AS id, r.was, r.now_state FROM (${BULK_BATCH}) b CROSS JOIN LATERAL stampeded_retry(b.id, b.queue) r`,
);

/** One batch of a bulk cancel: fenced as a single cancel is. */
export const BULK_CANCEL = sql(
  'dashboard_bulk_cancel',
  `SELECT b.id::text AS id, r.was, r.now_state FROM (${BULK_BATCH}) b CROSS JOIN LATERAL stampeded_cancel(b.id, b.queue) r`,
);

/** One batch of a bulk discard, through the same function a single discard uses; $8 is the error it records. */
export const BULK_DISCARD = sql(
  'dashboard_bulk_discard',
  `SELECT b.id::text AS id, r.was, r.now_state FROM (${BULK_BATCH}) b CROSS JOIN LATERAL stampeded_discard(b.id, b.queue, $8::text) r`,
);
