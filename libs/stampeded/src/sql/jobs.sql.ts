import { sql } from './statement.js';

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
const INPUT_COLUMNS = `
           id uuid, queue text, task text, args json, meta json, tenant_id text, priority smallint, destination text,
           run_at timestamptz, delay_ms double precision, expire_seconds integer, max_attempts smallint,
           backoff_base_ms smallint, backoff_max_ms integer, max_interruptions smallint, max_deferrals smallint,
           dedup_scope text, dedup_period text, dead_letter_queue text, remove_on_complete boolean,
           backoff_base_wide_ms integer, ordering_key text`;
/** The batch's rows read from $1 and $2 (see INPUT_COLUMNS), with `extraColumns` of a statement's own after the job's. */
export function jobInputRows(extraColumns = ''): string {
  const columns = extraColumns ? `${INPUT_COLUMNS}, ${extraColumns}` : INPUT_COLUMNS;
  const names = columns.split(',').map((c) => c.trim().split(/\s+/)[0]);
  const values = names.map((n) => (['args', 'meta'].includes(n) ? `coalesce(b.${n}, c.${n})::jsonb AS ${n}` : `coalesce(b.${n}, c.${n}) AS ${n}`)).join(', ');
  return `(
    SELECT b.ord, ${values}
      FROM ROWS FROM (json_to_recordset($1::json) AS (${columns}))
           WITH ORDINALITY AS b(${names.join(', ')}, ord)
     CROSS JOIN json_to_record($2::json) AS c(${columns})
) r`;
}
const INPUT_ROWS = jobInputRows();

/** When a job is due: at its runAt, or its delay from now, on the database's clock. */
export const SCHEDULED_AT = (runAt: string, delayMs: string) => `coalesce(${runAt}, now() + make_interval(secs => coalesce(${delayMs}, 0) / 1000.0))`;

/**
 * A keyed job's place in its key's line (migration 11): its id, which is
 * drawn in enqueue order. NULL for a job without a key.
 */
export const ORDERING_POSITION = (key: string, id: string) => `CASE WHEN ${key} IS NOT NULL THEN ${id} END`;

/** The columns a job without a dedup scope is inserted with (ENQUEUE_PLAIN, ENQUEUE_ONE). */
export const PLAIN_COLUMNS = `id, queue, task, args, meta, tenant_id, priority, destination, scheduled_at, expire_seconds,
        max_attempts, backoff_base_ms, backoff_max_ms, max_interruptions, max_deferrals, dead_letter_queue, remove_on_complete,
        backoff_base_wide_ms, ordering_key, ordering_position`;

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
/** What ENQUEUE_KEYED adds to ENQUEUE: the rank above, as one more input column, and the state it chooses. */
const KEYED_NTH_COLUMN = ', ' + NTH_OF_KEY;
const KEYED_STATE_OF_INPUT = ', ' + KEYED_STATE('input', 'input.nth > 1');

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
 * duplicate's twin was of another line.
 */
function enqueueStatement(name: string, keyed: boolean) {
  const nthColumn = keyed ? KEYED_NTH_COLUMN : '';
  const stateColumn = keyed ? ', state' : '';
  const stateValue = keyed ? KEYED_STATE_OF_INPUT : '';
  return sql(
    name,
    `
WITH input AS MATERIALIZED (
    SELECT r.id, r.ord, r.queue, r.task, r.args, r.meta, r.tenant_id, r.priority, r.destination,
           ${SCHEDULED_AT('r.run_at', 'r.delay_ms')} AS scheduled_at,
           r.expire_seconds, r.max_attempts, r.backoff_base_ms, r.backoff_max_ms,
           r.max_interruptions, r.max_deferrals, r.dedup_scope, r.dedup_period, r.dead_letter_queue,
           r.remove_on_complete, r.backoff_base_wide_ms, r.ordering_key, ${DEDUP_KEY} AS dedup_key${nthColumn}
      FROM ${INPUT_ROWS}
),
inserted AS (
    INSERT INTO stampeded_jobs
           (id, queue, task, args, meta, tenant_id, priority, destination, scheduled_at, expire_seconds,
            max_attempts, backoff_base_ms, backoff_max_ms, max_interruptions, max_deferrals,
            dedup_scope, dedup_period, dead_letter_queue, remove_on_complete, backoff_base_wide_ms,
            ordering_key, ordering_position${stateColumn})
    SELECT id, queue, task, args, meta, tenant_id, priority, destination, scheduled_at, expire_seconds,
           max_attempts, backoff_base_ms, backoff_max_ms, max_interruptions, max_deferrals,
           dedup_scope, dedup_period, dead_letter_queue, remove_on_complete, backoff_base_wide_ms,
           ordering_key, ${ORDERING_POSITION('ordering_key', 'id')}${stateValue}
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
SELECT r.id, r.queue, r.task, r.args, r.meta, r.tenant_id, r.priority, r.destination,
       ${SCHEDULED_AT('r.run_at', 'r.delay_ms')},
       r.expire_seconds, r.max_attempts, r.backoff_base_ms, r.backoff_max_ms,
       r.max_interruptions, r.max_deferrals, r.dead_letter_queue, r.remove_on_complete, r.backoff_base_wide_ms,
       r.ordering_key, ${ORDERING_POSITION('r.ordering_key', 'r.id')}
  FROM ${INPUT_ROWS}`,
);

/**
 * ENQUEUE_PLAIN for a batch, or a single job, in which a job has an ordering
 * key: each keyed job goes in 'available' or 'pending' as KEYED_STATE says.
 * A batch without a key goes through ENQUEUE_PLAIN or ENQUEUE_ONE, which
 * read no line.
 */
export const ENQUEUE_PLAIN_KEYED = sql(
  'stampeded_enqueue_plain_keyed',
  `
WITH input AS MATERIALIZED (
    SELECT r.*, ${NTH_OF_KEY} FROM ${INPUT_ROWS}
)
INSERT INTO stampeded_jobs (${PLAIN_COLUMNS}, state)
SELECT r.id, r.queue, r.task, r.args, r.meta, r.tenant_id, r.priority, r.destination,
       ${SCHEDULED_AT('r.run_at', 'r.delay_ms')},
       r.expire_seconds, r.max_attempts, r.backoff_base_ms, r.backoff_max_ms,
       r.max_interruptions, r.max_deferrals, r.dead_letter_queue, r.remove_on_complete, r.backoff_base_wide_ms,
       r.ordering_key, ${ORDERING_POSITION('r.ordering_key', 'r.id')}, ${KEYED_STATE('r', 'r.nth > 1')}
  FROM input r
 ORDER BY r.ord`,
);

/**
 * ENQUEUE_PLAIN for one job, its values as parameters: what enqueue() sends
 * from a request handler, with no JSON batch to parse for its one row. The
 * columns and defaults are ENQUEUE_PLAIN's, its parameters after the id in
 * the order of ENQUEUE_ONE_KEYS.
 */
export const ENQUEUE_ONE = sql(
  'stampeded_enqueue_one',
  `
INSERT INTO stampeded_jobs (${PLAIN_COLUMNS})
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, ${SCHEDULED_AT('$9::timestamptz', '$10::float8')},
        $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, ${ORDERING_POSITION('$20::text', '$1::uuid')})`,
);

/** ENQUEUE_ONE's parameters after the id, by JobRow key. */
export const ENQUEUE_ONE_KEYS = [
  'queue',
  'task',
  'args',
  'meta',
  'tenant_id',
  'priority',
  'destination',
  'run_at',
  'delay_ms',
  'expire_seconds',
  'max_attempts',
  'backoff_base_ms',
  'backoff_max_ms',
  'max_interruptions',
  'max_deferrals',
  'dead_letter_queue',
  'remove_on_complete',
  'backoff_base_wide_ms',
  'ordering_key',
] as const;

/**
 * The worker's batched completion, functions/stampeded_complete_many.sql. $5:
 * the jobs' results as a jsonb[] literal, or NULL when none of the batch has
 * one (see completionArrays).
 */
const COMPLETE_MANY_CALL = `stampeded_complete_many($1, $2::text[], $3::uuid[], $4::smallint[], $5::jsonb[])`;

export const COMPLETE_MANY = sql('stampeded_complete_many', `SELECT id::text AS id FROM ${COMPLETE_MANY_CALL}`);

/**
 * The job events other processes hear (`events: 'fleet'`), sent by the
 * statement that records the outcome: in its transaction, so that an event
 * is sent for what committed and only for that, and an outcome that commits
 * is heard unless a listener's connection is down at the time. The payload
 * is what events/event-notification.ts reads: the jobs of one queue and task,
 * a hundred at most, so that it stays under PostgreSQL's 8,000 bytes (a job
 * takes under 50 bytes; a queue or task name is sent when it takes 1,000
 * bytes or less as JSON, and read from the table otherwise).
 */
const EVENT_NAME = (value: string) => `CASE WHEN octet_length(to_json(${value})::text) <= 1000 THEN ${value} END`;
const JOBS_PER_NOTIFICATION = 100;

/**
 * COMPLETE_MANY, and one NOTIFY on the channel $7 per hundred completed jobs
 * of a queue and task ($6: the tasks, in the order of $3): a batch of one
 * task is a few notifications, not one per job. Answers the completed ids,
 * and a NULL per notification. The payload is written as text, grouped by
 * position in the batch rather than sorted: json_agg and a window over the
 * batch cost twice as much (bench/RESULTS.md, "Job events across processes").
 */
export const COMPLETE_MANY_NOTIFY = sql(
  'stampeded_complete_many_notify',
  `
WITH done AS MATERIALIZED (
    SELECT c.id, c.queue FROM ${COMPLETE_MANY_CALL} c
)
SELECT d.id::text AS id FROM done d
UNION ALL
SELECT NULL FROM (
    SELECT pg_notify($7, '{"w":"' || $1::uuid || '","t":"completed","q":' || coalesce(to_json(${EVENT_NAME('e.queue')})::text, 'null')
                         || ',"k":' || coalesce(to_json(${EVENT_NAME('e.task')})::text, 'null')
                         || ',"j":[' || string_agg('["' || e.id::text || '",' || e.attempt::text || ']', ',') || ']}')
      FROM (SELECT d.queue, o.task, d.id, o.attempt, (o.ord - 1) / ${JOBS_PER_NOTIFICATION} AS chunk
              FROM done d
              JOIN unnest($3::uuid[], $4::smallint[], $6::text[]) WITH ORDINALITY AS o(id, attempt, task, ord) ON o.id = d.id) e
     GROUP BY e.queue, e.task, e.chunk
) n`,
);

export const FAIL = sql('stampeded_fail', `SELECT was, now_state, dead_lettered FROM stampeded_fail($1, $2, $3, $4, $5, $6, $7, $8)`);

/** FAIL, and its NOTIFY on the channel $10 when it was recorded ($9: the job's task). */
export const FAIL_NOTIFY = sql(
  'stampeded_fail_notify',
  `
SELECT f.was, f.now_state, f.dead_lettered,
       pg_notify($10, json_build_object(
           'w', $3::uuid, 't', CASE f.now_state WHEN 'retryable' THEN 'retrying' ELSE 'discarded' END,
           'q', ${EVENT_NAME('$1::text')}, 'k', ${EVENT_NAME('$9::text')},
           'j', json_build_array(json_build_array($2::uuid, $4::smallint)),
           'f', $5::text, 'd', $7::bigint, 'l', f.dead_lettered)::text) AS notified
  FROM stampeded_fail($1, $2, $3, $4, $5, $6, $7, $8) f`,
);

/**
 * Moves a retryable job to the back of its key's line ($4: a fresh UUIDv7,
 * later than every position of its key drawn before it), for a task whose
 * retries give up their place (ordering: { retryKeepsPlace: false }), and
 * releases the job that waited behind it, now the head of the line
 * (stampeded_release_waiting), in the same statement. Run after the failure
 * is recorded, fenced by the attempt that failed: a job claimed again
 * meanwhile, or finished, is left where it is. Until it runs the job holds
 * its place, which is the default's behaviour: safe to lose.
 */
export const ORDERING_TO_BACK = sql(
  'stampeded_ordering_to_back',
  `
WITH moved AS (
    UPDATE stampeded_jobs SET ordering_position = $4::uuid
     WHERE queue = $1 AND id = $2::uuid AND attempt = $3 AND state = 'retryable' AND ordering_key IS NOT NULL
    RETURNING queue, id, ordering_key
)
SELECT stampeded_release_waiting(NULL, array_agg(m.queue), array_agg(m.id), NULL, array_agg(m.ordering_key)) AS released
  FROM moved m
HAVING count(*) > 0`,
);

export const RELEASE = sql('stampeded_release', `SELECT was, now_state FROM stampeded_release($1, $2, $3, $4)`);

export const TOUCH = sql('stampeded_touch', `SELECT stampeded_touch($1, $2, $3, $4) AS owned`);

export const PROGRESS = sql('stampeded_progress', `SELECT stampeded_progress($1, $2, $3, $4, $5::jsonb) AS owned`);

/** PROGRESS, and its NOTIFY on the channel $7 when it was written ($6: the job's task; the progress, at most 1 KB, goes with it). */
export const PROGRESS_NOTIFY = sql(
  'stampeded_progress_notify',
  `
SELECT o.owned,
       CASE WHEN o.owned THEN pg_notify($7, json_build_object(
           'w', $3::uuid, 't', 'progress', 'q', ${EVENT_NAME('$1::text')}, 'k', ${EVENT_NAME('$6::text')},
           'j', json_build_array(json_build_array($2::uuid, $4::smallint)), 'p', $5::jsonb)::text) END AS notified
  FROM (SELECT stampeded_progress($1, $2, $3, $4, $5::jsonb) AS owned) o`,
);

export const CHECKPOINT = sql('stampeded_checkpoint', `SELECT stampeded_checkpoint($1, $2, $3, $4, $5::jsonb) AS seq`);

export const CANCEL = sql('stampeded_cancel', `SELECT was, now_state, queue, worker_id FROM stampeded_cancel($1, $2)`);

/**
 * CANCEL, and its NOTIFY on the channel $3 when this call cancelled the job.
 * The job's task and attempt, which a cancel leaves as they were, are read
 * from the statement's snapshot.
 */
export const CANCEL_NOTIFY = sql(
  'stampeded_cancel_notify',
  `
SELECT c.was, c.now_state, c.queue, c.worker_id,
       CASE WHEN c.now_state = 'cancelled' AND c.was NOT IN ('completed', 'discarded', 'cancelled') THEN (
           SELECT pg_notify($3, json_build_object(
                      'w', c.worker_id, 't', 'cancelled', 'q', ${EVENT_NAME('j.queue')}, 'k', ${EVENT_NAME('j.task')},
                      'j', json_build_array(json_build_array(j.id, j.attempt)))::text)
             FROM stampeded_jobs j
            WHERE j.queue = c.queue AND j.id = $1::uuid)
       END AS notified
  FROM stampeded_cancel($1, $2) c`,
);

export const RETRY = sql('stampeded_retry', `SELECT was, now_state, queue FROM stampeded_retry($1, $2)`);

export const GET_JOB = sql('stampeded_get_job', `SELECT * FROM stampeded_jobs WHERE id = $1 AND ($2::text IS NULL OR queue = $2)`);

/**
 * Which of the jobs a worker holds (running or buffered) were cancelled: how
 * a worker that cannot LISTEN (behind a transaction-mode pooler, with no
 * direct connection) learns of a cancel. By primary key, one statement.
 */
export const CANCELLED_AMONG = sql(
  'stampeded_cancelled_among',
  `SELECT s.id::text AS id
     FROM unnest($1::text[], $2::uuid[]) AS w(queue, id)
     JOIN stampeded_jobs s ON s.queue = w.queue AND s.id = w.id
    WHERE s.state = 'cancelled'`,
);

export const GET_JOBS = sql('stampeded_get_jobs', `SELECT * FROM stampeded_jobs WHERE id = ANY($1::uuid[])`);

/** The queue and task of jobs whose event notification left them out (too long to send). */
export const EVENT_JOB_NAMES = sql('stampeded_event_job_names', `SELECT id::text AS id, queue, task FROM stampeded_jobs WHERE id = ANY($1::uuid[])`);

/**
 * Of the jobs waited for ($1: their queues, $2: their ids), those that
 * finished (completed, discarded or cancelled), whole, and those no longer
 * stored, as waited_id alone: one statement however many are waited for,
 * each found by its primary key. A job still to finish answers nothing.
 */
export const FINISHED_OR_GONE = sql(
  'stampeded_finished_or_gone',
  `
SELECT w.id::text AS waited_id, j.*
  FROM unnest($1::text[], $2::uuid[]) AS w(queue, id)
  LEFT JOIN LATERAL (SELECT * FROM stampeded_jobs s WHERE s.queue = w.queue AND s.id = w.id) j ON true
 WHERE j.id IS NULL OR j.state IN ('completed', 'discarded', 'cancelled')`,
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
