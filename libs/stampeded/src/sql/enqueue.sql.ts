import { sql } from './statement.js';
import { JOB_COLUMNS, PLAIN_INPUT_COLUMNS } from '../queue/job-columns.js';
import { WAITING_STATES } from '../interfaces/job.interface.js';
import { RUNTIME_META_KEY } from '../stampeded.constants.js';

// The enqueue statements. Their input columns, insert and select lists are
// made from JOB_COLUMNS (queue/job-columns.ts), the one list of what an
// enqueue writes.

// The dedup key the schema's generated column computes, for a row not yet
// inserted: the seed's expression, with now() for inserted_at. The one
// statement that needs a key before the insert (to find a twin through the
// dedup index) cannot ask PostgreSQL to evaluate a generated column for a row
// it has not inserted, so the expression is restated here, and
// test/enqueue/enqueue.e2e-spec.ts checks it finds the twin for every period.
const DEDUP_KEY = `
  CASE WHEN r.dedup_scope IS NULL THEN NULL ELSE sha256((
    r.dedup_scope || coalesce(
      ':' || extract(epoch FROM (date_trunc(r.dedup_period, now(), 'UTC') - to_timestamp(0)))::bigint::text,
      ''))::bytea) END`;

/**
 * The batch's rows, as the enqueue statements read them: $1 is a JSON array
 * with one object per job holding only what is its own, $2 one object with
 * the values every job of the batch shares (see rowsToJson), so that a bulk
 * enqueue of one task does not have its queue, task and options parsed again
 * for every row (bench/RESULTS.md). A key missing from both is NULL. json,
 * not jsonb: json_to_recordset reads the text as it goes, where $1::jsonb
 * would first build a binary copy of the whole batch. args and meta are read
 * as json too and cast to jsonb once, after the coalesce: json_to_recordset
 * fills a jsonb column several times slower than a json column cast
 * afterwards (bench/RESULTS.md).
 */
const INPUT_COLUMNS = [{ column: 'id', type: 'uuid', json: false }, ...JOB_COLUMNS.map((c) => ({ column: c.column, type: c.type, json: 'json' in c }))];

/** The batch's rows read from $1 and $2 (see INPUT_COLUMNS), with `extraColumns` of a statement's own after the job's. */
export function jobInputRows(extraColumns: readonly { column: string; type: string }[] = []): string {
  const columns = [...INPUT_COLUMNS, ...extraColumns.map((c) => ({ ...c, json: false }))];
  const definition = columns.map((c) => `${c.column} ${c.type}`).join(', ');
  const names = columns.map((c) => c.column).join(', ');
  const values = columns.map((c) => `coalesce(b.${c.column}, c.${c.column})${c.json ? '::jsonb' : ''} AS ${c.column}`).join(', ');
  return `(
    SELECT b.ord, ${values}
      FROM ROWS FROM (json_to_recordset($1::json) AS (${definition}))
           WITH ORDINALITY AS b(${names}, ord)
     CROSS JOIN json_to_record($2::json) AS c(${definition})
) r`;
}
const INPUT_ROWS = jobInputRows();

/** When a job is due: at its runAt, or its delay from now, on the database's clock. */
const SCHEDULED_AT = (runAt: string, delayMs: string) => `coalesce(${runAt}, now() + make_interval(secs => coalesce(${delayMs}, 0) / 1000.0))`;

/**
 * A keyed job's place in its key's order (migration 11): its id, which is
 * drawn in enqueue order. NULL for a job without a key.
 */
const ORDERING_POSITION = (key: string, id: string) => `CASE WHEN ${key} IS NOT NULL THEN ${id} END`;

/**
 * What an enqueue inserts, column by column: the id, each job column as it
 * is read (the dedup columns only when `dedup`), runAt or delayMs as
 * scheduled_at, and a keyed job's place. `read(column, type)` is how the
 * statement reads an input column; `type` is given where it is read inside
 * an expression, which a parameter needs cast.
 */
function insertedColumns(read: (column: string, type?: string) => string, dedup: boolean): { column: string; value: string }[] {
  const stored = JOB_COLUMNS.filter((c) => c.stored === 'column' || (dedup && c.stored === 'dedup'));
  return [
    { column: 'id', value: read('id') },
    ...stored.map((c) => ({ column: c.column, value: read(c.column) })),
    { column: 'scheduled_at', value: SCHEDULED_AT(read('run_at', 'timestamptz'), read('delay_ms', 'double precision')) },
    { column: 'ordering_position', value: ORDERING_POSITION(read('ordering_key', 'text'), read('id', 'uuid')) },
  ];
}

/** The insert's column list and its values read from the input rows as `alias`. */
function insertFrom(alias: string, dedup: boolean): { columns: string; values: string } {
  const inserted = insertedColumns((column) => `${alias}.${column}`, dedup);
  return { columns: inserted.map((c) => c.column).join(', '), values: inserted.map((c) => c.value).join(', ') };
}

/**
 * The columns and values a job without a dedup scope is inserted with, from
 * the input rows as `r` (ENQUEUE_PLAIN, ENQUEUE_PLAIN_KEYED, the workflow's
 * enqueue); ENQUEUE_ONE inserts the same columns from its parameters.
 */
export const { columns: PLAIN_COLUMNS, values: PLAIN_VALUES } = insertFrom('r', false);

/**
 * A keyed job's state at enqueue (migration 14): 'pending' when its key has
 * an unfinished job in its queue -- one waiting for its turn, one active, or
 * an earlier row of the same statement (`earlier`) -- so that it waits
 * outside the claim index until the outcome of the job ahead releases it
 * (functions/stampeded_release_waiting.sql); 'available' when it is the
 * head. The waiting index answers first: behind a hot key it holds the
 * key's live entries, where the active line starts with its finished jobs'.
 * An enqueue that reads the key just before the job ahead finishes, and
 * commits after that job's release looked, leaves its job waiting with
 * nothing ahead: the leader's sweep releases it (OrderingSweeper).
 */
const KEYED_STATE = (r: string, earlier: string) => `
       CASE WHEN ${r}.ordering_key IS NULL THEN 'available'
            WHEN ${earlier}
              OR EXISTS (SELECT 1 FROM stampeded_jobs u
                          WHERE u.queue = ${r}.queue AND u.ordering_key = ${r}.ordering_key
                            AND u.state = 'pending' AND u.deps_pending IS NULL)
              OR EXISTS (SELECT 1 FROM stampeded_jobs u
                          WHERE u.queue = ${r}.queue AND u.ordering_key = ${r}.ordering_key
                            AND u.state IN ('available','claimed','executing','retryable'))
            THEN 'pending' ELSE 'available' END`;

/** The rank of a row among the rows of its queue and key in the batch: the first of a key is 1. */
const NTH_OF_KEY = `row_number() OVER (PARTITION BY r.queue, r.ordering_key ORDER BY r.ord) AS nth`;

/**
 * Inserts any number of jobs in one statement and answers, per input row in
 * order, the job's id and whether it was a duplicate.
 *
 * Ids are drawn before the insert so that inserted rows can be matched back to
 * their input rows. A duplicate of a job committed before this statement is
 * found by its dedup key; a duplicate of an earlier row of the same statement
 * takes that row's id. A duplicate of a job that another transaction inserted
 * concurrently is neither (our snapshot predates it): its id comes back NULL,
 * and the caller asks again. With `keyed`, for a batch with an ordering key,
 * each keyed job's state is chosen as KEYED_STATE says; a row after a
 * duplicate of its key in the batch waits, and the sweep releases it when the
 * duplicate's twin was of another key.
 */
function enqueueStatement(name: string, keyed: boolean) {
  const { columns, values } = insertFrom('input', true);
  const nthColumn = keyed ? `, ${NTH_OF_KEY}` : '';
  const stateColumn = keyed ? ', state' : '';
  const stateValue = keyed ? `, ${KEYED_STATE('input', 'input.nth > 1')}` : '';
  return sql(
    name,
    `
WITH input AS MATERIALIZED (
    SELECT r.*, ${DEDUP_KEY} AS dedup_key${nthColumn}
      FROM ${INPUT_ROWS}
),
inserted AS (
    INSERT INTO stampeded_jobs (${columns}${stateColumn})
    SELECT ${values}${stateValue}
      FROM input
     ORDER BY ord
    ON CONFLICT (queue, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING id
),
won AS (
    SELECT i.ord, i.id, i.queue, i.dedup_key FROM input i JOIN inserted USING (id)
)
SELECT i.ord::int AS ord,
       coalesce(w.id, sibling.id, existing.id)::text AS id,
       w.id IS NULL AS deduplicated
  FROM input i
  LEFT JOIN won w ON w.ord = i.ord
  LEFT JOIN LATERAL (
       SELECT s.id FROM won s
        WHERE w.id IS NULL AND s.queue = i.queue AND s.dedup_key = i.dedup_key
        LIMIT 1) sibling ON true
  LEFT JOIN LATERAL (
       SELECT j.id FROM stampeded_jobs j
        WHERE w.id IS NULL AND sibling.id IS NULL
          AND j.queue = i.queue AND j.dedup_key = i.dedup_key
        LIMIT 1) existing ON true
 ORDER BY i.ord`,
  );
}

export const ENQUEUE = enqueueStatement('stampeded_enqueue', false);

/** ENQUEUE for a batch in which a job has an ordering key. */
export const ENQUEUE_KEYED = enqueueStatement('stampeded_enqueue_keyed', true);

/**
 * ENQUEUE for a batch in which no job has a dedup scope, which is most of
 * them: nothing can conflict, so there is no ON CONFLICT, no matching of
 * inserted rows back to their input and no search for an existing twin --
 * every row is inserted, or the statement fails. That machinery is a large
 * share of a bulk insert's time (bench/RESULTS.md). The ids come with the rows
 * (UuidV7Source), so nothing comes back: handing drawn ids back takes a
 * materialised copy of the batch and a result row per job.
 */
export const ENQUEUE_PLAIN = sql(
  'stampeded_enqueue_plain',
  `
INSERT INTO stampeded_jobs (${PLAIN_COLUMNS})
SELECT ${PLAIN_VALUES}
  FROM ${INPUT_ROWS}`,
);

/**
 * ENQUEUE_PLAIN for a batch, or a single job, in which a job has an ordering
 * key: each keyed job goes in 'available' or 'pending' as KEYED_STATE says.
 * A batch without a key goes through ENQUEUE_PLAIN or ENQUEUE_ONE, which
 * read no key's order.
 */
export const ENQUEUE_PLAIN_KEYED = sql(
  'stampeded_enqueue_plain_keyed',
  `
WITH input AS MATERIALIZED (
    SELECT r.*, ${NTH_OF_KEY} FROM ${INPUT_ROWS}
)
INSERT INTO stampeded_jobs (${PLAIN_COLUMNS}, state)
SELECT ${PLAIN_VALUES}, ${KEYED_STATE('r', 'r.nth > 1')}
  FROM input r
 ORDER BY r.ord`,
);

/** ENQUEUE_ONE's parameters after the id, by JobRow key. */
export const ENQUEUE_ONE_KEYS = PLAIN_INPUT_COLUMNS;

/**
 * ENQUEUE_PLAIN for one job, its values as parameters: what enqueue() sends
 * from a request handler, with no JSON batch to parse for its one row. The
 * columns are ENQUEUE_PLAIN's; its parameters, after the id, are the
 * columns of ENQUEUE_ONE_KEYS in that order.
 */
export const ENQUEUE_ONE = sql(
  'stampeded_enqueue_one',
  (() => {
    const parameter = (column: string, type?: string) => {
      const n = column === 'id' ? 1 : ENQUEUE_ONE_KEYS.indexOf(column as (typeof ENQUEUE_ONE_KEYS)[number]) + 2;
      if (n === 1 && column !== 'id') throw new Error(`ENQUEUE_ONE reads ${column}, which ENQUEUE_ONE_KEYS does not list`);
      return type ? `$${n}::${type}` : `$${n}`;
    };
    const inserted = insertedColumns(parameter, false);
    const columns = inserted.map((c) => c.column).join(', ');
    const values = inserted.map((c) => c.value).join(', ');
    return `
INSERT INTO stampeded_jobs (${columns})
VALUES (${values})`;
  })(),
);

/**
 * The defaults of the job columns an enqueue fills when the job does not set
 * them, as the installed schema declares them ($1: the jobs table, qualified):
 * the schema is their one home, and a batch insert cannot take DEFAULT per row.
 */
export const READ_JOB_COLUMN_DEFAULTS = sql(
  'stampeded_job_column_defaults',
  `SELECT a.attname AS name, pg_get_expr(d.adbin, d.adrelid) AS expression
     FROM pg_attrdef d
     JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
    WHERE d.adrelid = $1::regclass AND a.attname = ANY($2::text[])`,
);

/** What ENQUEUE_DEBOUNCE reads beside a job's columns: its dedup mode and cap (JobRow's debounce). */
export const DEBOUNCE_INPUT_COLUMNS = [
  { column: 'dedup_mode', type: 'text' },
  { column: 'dedup_max_delay_ms', type: 'double precision' },
] as const;

/** The states in which a debounced duplicate may change its twin: waiting, and claimed by no one. */
const REPLACEABLE = `j.state IN (${[...WAITING_STATES].map((s) => `'${s}'`).join(', ')}) AND j.claimed_by IS NULL`;

/**
 * An extended twin's new run time: the newest request's (its dedup.delayMs
 * from now), but no later than its cap after the request that inserted the
 * twin (inserted_at, which nothing changes). Past the cap the twin keeps the
 * time it has, so a steady stream of requests cannot starve it.
 */
const EXTENDED_AT = `CASE WHEN n.dedup_mode <> 'extend' THEN j.scheduled_at
            WHEN n.dedup_max_delay_ms IS NULL THEN ${SCHEDULED_AT('n.run_at', 'n.delay_ms')}
            ELSE least(${SCHEDULED_AT('n.run_at', 'n.delay_ms')},
                       greatest(j.scheduled_at, j.inserted_at + make_interval(secs => n.dedup_max_delay_ms / 1000.0))) END`;

/**
 * ENQUEUE for jobs whose dedup mode is replace or extend (debounce), with
 * the same answer plus `replaced` and `runs_after`. Per scope, the batch's
 * newest request is the one that counts, and goes to one of three places:
 *
 * - the scope's follow-up, when one waits behind the scope's job (migration
 *   17): it takes the request's args and meta (this runtime's key of meta
 *   only: the keys other runtimes wrote stay) and, with extend, its run time
 *   (EXTENDED_AT, capped from the follow-up's own first request);
 * - else the scope's job, when it is waiting and claimed by no one: the
 *   same replacement;
 * - else, the scope's job being claimed or running, a new follow-up behind
 *   it: 'pending', outside the dedup index, holding the scope it takes when
 *   that job finishes (functions/stampeded_release_follow_ups.sql). The job
 *   is locked FOR SHARE first, so that its outcome, which releases its
 *   follow-up, waits for this transaction's commit and then sees the
 *   follow-up; a job that finished after this statement's snapshot is not
 *   locked (PostgreSQL rechecks the WHERE on the newest row) and gets none.
 *
 * Without a job of the scope the request is inserted, under the id of the
 * scope's first row in the batch, as is a new follow-up. Each update is
 * fenced on its row still being what the snapshot saw (a follow-up still
 * waiting behind its job, a job still waiting): one that changed meanwhile
 * is left as it is. Whatever did not land -- a fenced update that found its
 * row changed, a job that finished before it could be locked, an insert
 * that lost a race on the dedup index or on the follow-up index -- answers
 * a NULL id, and the caller asks again, as for ENQUEUE.
 */
export const ENQUEUE_DEBOUNCE = sql(
  'stampeded_enqueue_debounce',
  (() => {
    // The newest request's columns, under its scope's first id: as the scope's job, or as its follow-up, which holds no scope yet.
    const asJob = insertedColumns((column) => (column === 'id' ? 'c.first_id' : `c.${column}`), true);
    const asFollowUp = insertedColumns((column) => (column === 'id' ? 'c.first_id' : column === 'dedup_scope' ? 'NULL' : `c.${column}`), true);
    const columns = asJob.map((c) => c.column).join(', ');
    const jobValues = asJob.map((c) => c.value).join(', ');
    const followUpValues = asFollowUp.map((c) => c.value).join(', ');
    return `
WITH input AS MATERIALIZED (
    SELECT r.*, ${DEDUP_KEY} AS dedup_key
      FROM ${jobInputRows(DEBOUNCE_INPUT_COLUMNS)}
),
scope AS MATERIALIZED (
    SELECT DISTINCT ON (queue, dedup_key) queue, dedup_key, ord AS first_ord, id AS first_id
      FROM input ORDER BY queue, dedup_key, ord
),
newest AS MATERIALIZED (
    SELECT DISTINCT ON (i.queue, i.dedup_key) i.*, s.first_ord, s.first_id
      FROM input i JOIN scope s USING (queue, dedup_key)
     ORDER BY i.queue, i.dedup_key, i.ord DESC
),
-- Per scope, its job and that job's follow-up, as this statement's snapshot sees them.
twin AS MATERIALIZED (
    SELECT n.*, h.id AS holder_id, h.waiting AS holder_waiting, f.id AS follow_up_id
      FROM newest n
      LEFT JOIN LATERAL (
           SELECT j.id, (${REPLACEABLE}) AS waiting FROM stampeded_jobs j
            WHERE j.queue = n.queue AND j.dedup_key = n.dedup_key
            LIMIT 1) h ON true
      LEFT JOIN LATERAL (
           SELECT j.id FROM stampeded_jobs j
            WHERE j.queue = n.queue AND j.dedup_follows = h.id AND j.state = 'pending'
            LIMIT 1) f ON true
),
replaced AS (
    UPDATE stampeded_jobs j
       SET args = n.args,
           meta = (j.meta - '${RUNTIME_META_KEY}') || n.meta,
           scheduled_at = ${EXTENDED_AT}
      FROM twin n
     WHERE j.queue = n.queue AND j.id = coalesce(n.follow_up_id, n.holder_id)
       AND CASE WHEN n.follow_up_id IS NOT NULL THEN j.state = 'pending' AND j.dedup_follows = n.holder_id
                ELSE n.holder_waiting AND j.dedup_key = n.dedup_key AND ${REPLACEABLE} END
    RETURNING j.id, n.queue, n.dedup_key, j.dedup_follows
),
held AS (
    SELECT j.queue, j.id
      FROM stampeded_jobs j
     WHERE j.queue = ANY (ARRAY(SELECT t.queue FROM twin t WHERE NOT t.holder_waiting AND t.follow_up_id IS NULL))
       AND j.id    = ANY (ARRAY(SELECT t.holder_id FROM twin t WHERE NOT t.holder_waiting AND t.follow_up_id IS NULL))
       AND j.dedup_key IS NOT NULL
     ORDER BY j.queue, j.id
       FOR SHARE
),
followed AS (
    INSERT INTO stampeded_jobs (${columns}, state, dedup_follows, dedup_follow_scope)
    SELECT ${followUpValues}, 'pending', h.id, c.dedup_scope
      FROM twin c JOIN held h ON h.queue = c.queue AND h.id = c.holder_id
     WHERE NOT c.holder_waiting AND c.follow_up_id IS NULL
     ORDER BY c.first_ord
    ON CONFLICT (queue, dedup_follows) WHERE dedup_follows IS NOT NULL DO NOTHING
    RETURNING id, dedup_follows
),
inserted AS (
    INSERT INTO stampeded_jobs (${columns})
    SELECT ${jobValues}
      FROM twin c
     WHERE c.holder_id IS NULL
     ORDER BY c.first_ord
    ON CONFLICT (queue, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING id
),
outcome AS (
    SELECT s.queue, s.dedup_key, s.first_ord, s.first_id,
           coalesce(w.id, p.id, f.id) AS id,
           p.id IS NOT NULL OR f.id IS NOT NULL AS replaced,
           coalesce(p.dedup_follows, f.dedup_follows) AS runs_after
      FROM scope s
      LEFT JOIN inserted w ON w.id = s.first_id
      LEFT JOIN followed f ON f.id = s.first_id
      LEFT JOIN replaced p ON p.queue = s.queue AND p.dedup_key = s.dedup_key
)
SELECT i.ord::int AS ord,
       o.id::text AS id,
       i.ord <> o.first_ord OR o.id <> i.id OR o.runs_after IS NOT NULL AS deduplicated,
       -- A later row of the batch replaced, in effect, the args its scope's first row inserted.
       o.replaced OR (i.ord <> o.first_ord AND o.id = o.first_id) AS replaced,
       o.runs_after::text AS runs_after
  FROM input i
  JOIN outcome o USING (queue, dedup_key)
 ORDER BY i.ord`;
  })(),
);
