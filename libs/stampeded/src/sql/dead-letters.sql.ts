import { sql } from './statement.js';
import { SETTING_COLUMNS } from '../queue/job-columns.js';

/** What a redriven job takes from its dead-letter copy: what it is, and its attempts and dead-letter queue, which the copy keeps. */
const COPIED = 'queue, task, args, meta, tenant_id, priority, destination, max_attempts, dead_letter_queue';
const COPIED_VALUES = 'm.source_queue, m.task, m.args, m.meta, m.tenant_id, m.priority, m.destination, m.max_attempts, m.queue';
/** The settings the copy does not keep, read from its source job. */
const FROM_SOURCE = SETTING_COLUMNS.filter((c) => c !== 'max_attempts' && c !== 'dead_letter_queue');
const FROM_SOURCE_COLUMNS = FROM_SOURCE.join(', ');
const FROM_SOURCE_VALUES = FROM_SOURCE.map((c) => `s.${c}`).join(', ');

// A dead-letter copy is a job whose source_queue is set: stampeded_fail
// inserts it with the source job's id, queue and attempts. A copy is eligible
// for redrive while nothing is running it and it has not completed: the
// predicate of stampeded_jobs_dead_letter_idx (migration 4), restated here
// word for word so that the planner reads the copies from that index and not
// every row of the dead-letter queue's partition.
//
// $1 the dead-letter queue, $2 a task or NULL, $3 a fingerprint or NULL,
// $4 the newest copy id this run moves: copies dead-lettered after the run
// began (a redriven job that failed again at once) wait for the next run,
// so that a redrive of a queue whose upstream is still failing ends.
const ELIGIBLE = `
        c.queue = $1
    AND c.source_queue IS NOT NULL
    AND c.state IN ('available', 'retryable', 'discarded')
    AND c.id <= $4::uuid
    AND ($2::text IS NULL OR c.task = $2)
    -- The copy carries no fingerprint of its own until it fails itself, so
    -- the source job's is the one that says why it was dead-lettered.
    AND ($3::bytea IS NULL
         OR c.error_fingerprint = $3
         OR EXISTS (SELECT 1 FROM stampeded_jobs s
                     WHERE s.queue = c.source_queue AND s.id = c.source_id
                       AND s.error_fingerprint = $3))`;

/**
 * Whether the queue has ever held a job: the counters keep a row per queue
 * and state once one arrived, at zero after it left.
 */
export const REDRIVE_QUEUE_KNOWN = sql('stampeded_redrive_queue_known', `SELECT EXISTS (SELECT 1 FROM stampeded_queue_counts WHERE queue = $1) AS known`);

/** The queues that hold copies a redrive would move, for the message that names a queue that holds none. */
export const DEAD_LETTER_QUEUES = sql(
  'stampeded_dead_letter_queues',
  `SELECT DISTINCT c.queue FROM stampeded_jobs c
    WHERE c.source_queue IS NOT NULL
      AND c.state IN ('available', 'retryable', 'discarded')
    ORDER BY 1
    LIMIT 20`,
);

/**
 * The bound of one run: an id newer than every copy that exists now, the
 * greatest UUIDv7 of the database clock's current millisecond (any
 * PostgreSQL: uuidv7() is 18's).
 */
export const REDRIVE_BOUND = sql(
  'stampeded_redrive_bound',
  `SELECT (lpad(to_hex(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') || '7fffbfffffffffffffff')::uuid::text AS bound`,
);

/** What a redrive would move: per source queue and task. */
export const REDRIVE_PREVIEW = sql(
  'stampeded_redrive_preview',
  `SELECT c.source_queue, c.task, count(*)::bigint AS jobs
     FROM stampeded_jobs c
    WHERE ${ELIGIBLE}
    GROUP BY 1, 2
    ORDER BY 1, 2`,
);

/**
 * Moves one batch of dead-letter copies back to their source queues, in id
 * order after the cursor ($5), at most $6 of them: each copy is deleted and a
 * fresh job inserted in its source queue, in one statement, so a copy is
 * never both or neither. Answers the last id the batch read (NULL when it
 * found none: the run is over) and what it moved, per source queue and task.
 *
 * Safe to run twice at once: a copy is locked before it is moved, and SKIP
 * LOCKED leaves it to the run that holds it; a run that reads a copy another
 * run has since moved finds it deleted and moves nothing. Each copy moves
 * exactly once, and the runs' counts add up to the copies moved.
 *
 * A fresh job, not the copy with its queue changed: the copy's attempt budget
 * is spent, and moving a row between partitions by UPDATE would run through
 * the counters' UPDATE trigger as a row that changed queue, which the trigger
 * nets per (queue, state). The settings that the copy did not keep (timeout,
 * backoff, budgets: JOB_COLUMNS' settings) come from the source job while it
 * has not been pruned; after, the insert leaves them out, and they take the
 * table's DEFAULTs, their one home. The new job dead-letters to the same
 * queue again, as its source did.
 */
export const REDRIVE_BATCH = sql(
  'stampeded_redrive_batch',
  `WITH batch AS MATERIALIZED (
       SELECT c.queue, c.id FROM stampeded_jobs c
        WHERE ${ELIGIBLE}
          AND ($5::uuid IS NULL OR c.id > $5)
        ORDER BY c.id
        LIMIT $6
        FOR UPDATE OF c SKIP LOCKED
   ),
   moved AS (
       DELETE FROM stampeded_jobs j USING batch b
        WHERE j.queue = b.queue AND j.id = b.id
       RETURNING j.*
   ),
   -- A copy that ran in the dead-letter queue may have logged: its lines go with it.
   logs AS (
       DELETE FROM stampeded_job_logs l WHERE l.job_id = ANY (ARRAY(SELECT m.id FROM moved m))
   ),
   with_source AS (
       INSERT INTO stampeded_jobs (${COPIED}, ${FROM_SOURCE_COLUMNS})
       SELECT ${COPIED_VALUES}, ${FROM_SOURCE_VALUES}
         FROM moved m
         JOIN stampeded_jobs s ON s.queue = m.source_queue AND s.id = m.source_id
       RETURNING queue, task
   ),
   source_pruned AS (
       INSERT INTO stampeded_jobs (${COPIED})
       SELECT ${COPIED_VALUES}
         FROM moved m
        WHERE NOT EXISTS (SELECT 1 FROM stampeded_jobs s WHERE s.queue = m.source_queue AND s.id = m.source_id)
       RETURNING queue, task
   ),
   inserted AS (
       SELECT queue, task FROM with_source UNION ALL SELECT queue, task FROM source_pruned
   )
   SELECT (SELECT id::text FROM batch ORDER BY id DESC LIMIT 1) AS last_id,
          coalesce((SELECT json_agg(json_build_object('source_queue', queue, 'task', task, 'jobs', jobs) ORDER BY queue, task)
                      FROM (SELECT queue, task, count(*)::int AS jobs FROM inserted GROUP BY 1, 2) g), '[]'::json) AS moved`,
);
