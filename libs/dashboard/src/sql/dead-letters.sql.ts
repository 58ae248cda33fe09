import { sql } from './statement.js';

// A dead-letter copy is a job whose source_queue is set: stampeded_fail
// inserts it with the source job's id, queue and attempts. A copy is eligible
// for redrive while nothing is running it and it has not completed.
const ELIGIBLE = `
        c.queue = $1
    AND c.source_queue IS NOT NULL
    AND c.state IN ('available', 'retryable', 'discarded')
    AND ($2::text IS NULL OR c.task = $2)
    -- The copy carries no fingerprint of its own until it fails itself, so
    -- the source job's is the one that says why it was dead-lettered.
    AND ($3::bytea IS NULL
         OR c.error_fingerprint = $3
         OR EXISTS (SELECT 1 FROM stampeded_jobs s
                     WHERE s.queue = c.source_queue AND s.id = c.source_id
                       AND s.error_fingerprint = $3))`;

/** What a redrive would move: per source queue and task. */
export const REDRIVE_PREVIEW = sql(
  'dashboard_redrive_preview',
  `SELECT c.source_queue, c.task, count(*)::bigint AS jobs
     FROM stampeded_jobs c
    WHERE ${ELIGIBLE}
    GROUP BY 1, 2
    ORDER BY 1, 2`,
);

/**
 * Moves one batch of dead-letter copies back to their source queues, in id
 * order after the cursor: each copy is deleted and a fresh job inserted in
 * its source queue, in one statement, so a copy is never both or neither.
 *
 * A fresh job, not the copy with its queue changed: the copy's attempt budget
 * is spent, and moving a row between partitions by UPDATE would run through
 * the counters' UPDATE trigger as a row that changed queue, which the trigger
 * nets per (queue, state). The settings that the copy did not keep (timeout,
 * backoff, budgets) come from the source job while it has not been pruned, and
 * from the schema's defaults after. The new job dead-letters to the same queue
 * again, as its source did.
 */
export const REDRIVE_BATCH = sql(
  'dashboard_redrive_batch',
  `WITH batch AS MATERIALIZED (
       SELECT c.queue, c.id FROM stampeded_jobs c
        WHERE ${ELIGIBLE}
          AND ($4::uuid IS NULL OR c.id > $4)
        ORDER BY c.id
        LIMIT $5
        FOR UPDATE OF c SKIP LOCKED
   ),
   moved AS (
       DELETE FROM stampeded_jobs j USING batch b
        WHERE j.queue = b.queue AND j.id = b.id
       RETURNING j.*
   ),
   inserted AS (
       INSERT INTO stampeded_jobs
              (queue, task, args, meta, tenant_id, priority, destination, max_attempts, dead_letter_queue,
               expire_seconds, backoff_base_ms, backoff_max_ms, max_interruptions, max_deferrals)
       SELECT m.source_queue, m.task, m.args, m.meta, m.tenant_id, m.priority, m.destination, m.max_attempts, m.queue,
              coalesce(s.expire_seconds, 3600), coalesce(s.backoff_base_ms, 1000), coalesce(s.backoff_max_ms, 3600000),
              coalesce(s.max_interruptions, 1), coalesce(s.max_deferrals, 100)
         FROM moved m
         LEFT JOIN stampeded_jobs s ON s.queue = m.source_queue AND s.id = m.source_id
       RETURNING id
   )
   SELECT (SELECT count(*) FROM inserted)::int AS moved,
          (SELECT id::text FROM batch ORDER BY id DESC LIMIT 1) AS last_id`,
);
