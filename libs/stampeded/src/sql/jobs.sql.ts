import { sql } from './statement.js';

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
 * Moves a retryable job to the back of its key's order ($4: a fresh UUIDv7,
 * later than every position of its key drawn before it), for a task whose
 * retries give up their place (ordering: { retryKeepsPlace: false }), and
 * releases the job that waited behind it, now the front of its key's order
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

/**
 * The failures of a chunk's jobs in one statement: stampeded_fail for each
 * ($2 to $8, one element per job, in the order given), each fenced by its
 * own attempt ($1: the worker). Answers a row for each failure recorded: a
 * job no longer this worker's answers none.
 */
const FAIL_MANY_ROWS = `unnest($2::text[], $3::uuid[], $4::smallint[], $5::text[], $6::text[], $7::bigint[], $8::integer[], $9::text[])
       AS o(queue, id, attempt, kind, error, delay_ms, exit_status, task)
 CROSS JOIN LATERAL stampeded_fail(o.queue, o.id, $1::uuid, o.attempt, o.kind, o.error, o.delay_ms, o.exit_status) f`;

export const FAIL_MANY = sql('stampeded_fail_many', `SELECT o.id::text AS id, f.was, f.now_state, f.dead_lettered FROM ${FAIL_MANY_ROWS}`);

/** FAIL_MANY, and for each failure recorded the NOTIFY FAIL_NOTIFY sends, on the channel $10 ($9: the jobs' tasks). */
export const FAIL_MANY_NOTIFY = sql(
  'stampeded_fail_many_notify',
  `
SELECT o.id::text AS id, f.was, f.now_state, f.dead_lettered,
       pg_notify($10, json_build_object(
           'w', $1::uuid, 't', CASE f.now_state WHEN 'retryable' THEN 'retrying' ELSE 'discarded' END,
           'q', ${EVENT_NAME('o.queue')}, 'k', ${EVENT_NAME('o.task')},
           'j', json_build_array(json_build_array(o.id, o.attempt)),
           'f', o.kind, 'd', o.delay_ms, 'l', f.dead_lettered)::text) AS notified
  FROM ${FAIL_MANY_ROWS}`,
);

/**
 * A job cancelled by its own handler (a chunk's ctx.cancel()): the row is
 * locked behind the outcome fence ($3: the worker, $4: the attempt), and
 * only then cancelled by stampeded_cancel, in the same statement. A job this
 * worker no longer holds is left as it is, and answers no row.
 */
const CANCEL_CLAIMED_ROWS = `(
    SELECT queue, id FROM stampeded_jobs
     WHERE queue = $1 AND id = $2::uuid AND claimed_by = $3::uuid AND attempt = $4 AND state = 'executing'
       FOR UPDATE
) m CROSS JOIN LATERAL stampeded_cancel(m.id, m.queue) c`;

export const CANCEL_CLAIMED = sql('stampeded_cancel_claimed', `SELECT c.now_state FROM ${CANCEL_CLAIMED_ROWS}`);

/** CANCEL_CLAIMED, and its NOTIFY on the channel $6 ($5: the job's task). */
export const CANCEL_CLAIMED_NOTIFY = sql(
  'stampeded_cancel_claimed_notify',
  `
SELECT c.now_state,
       pg_notify($6, json_build_object(
           'w', $3::uuid, 't', 'cancelled', 'q', ${EVENT_NAME('m.queue')}, 'k', ${EVENT_NAME('$5::text')},
           'j', json_build_array(json_build_array(m.id, $4::smallint)))::text) AS notified
  FROM ${CANCEL_CLAIMED_ROWS}`,
);

export const RELEASE = sql('stampeded_release', `SELECT was, now_state FROM stampeded_release($1, $2, $3, $4)`);

export const TOUCH = sql('stampeded_touch', `SELECT stampeded_touch($1, $2, $3, $4) AS owned`);

/** stampeded_touch for each of a chunk's jobs ($1, $2, $4: their queues, ids and attempts; $3: the worker): answers those still this worker's. */
export const TOUCH_MANY = sql(
  'stampeded_touch_many',
  `SELECT t.id::text AS id
     FROM unnest($1::text[], $2::uuid[], $4::smallint[]) AS t(queue, id, attempt)
    WHERE stampeded_touch(t.queue, t.id, $3::uuid, t.attempt)`,
);

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
