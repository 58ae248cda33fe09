import { sql } from '@stampeded/nestjs/internal';

/** Jobs per queue and state, from the trigger-maintained counters: never count(*) over the jobs. */
export const QUEUE_COUNTS = sql(
  'dashboard_queue_counts',
  `SELECT queue, state, sum(n)::bigint AS n FROM stampeded_queue_counts GROUP BY queue, state ORDER BY queue, state`,
);

/**
 * Per queue: its policy and verdict, and the job at the head of the claim
 * order with how long it has been due. The head is read through the claim
 * index in its own order (priority, scheduled_at), one row per queue.
 */
export const QUEUE_STATE = sql(
  'dashboard_queue_state',
  `WITH names AS (
       SELECT queue FROM stampeded_queue_counts GROUP BY queue, state HAVING sum(n) <> 0
       UNION
       SELECT queue FROM stampeded_queue_policies
   )
   SELECT q.queue,
          p.verdict, p.reason, p.decided_at, p.max_running, p.max_wait_secs,
          head.scheduled_at AS head_due_since,
          extract(epoch FROM now() - head.scheduled_at)::float8 AS head_wait_secs
     FROM names q
     LEFT JOIN stampeded_queue_policies p ON p.queue = q.queue
     LEFT JOIN LATERAL (
          SELECT j.scheduled_at FROM stampeded_jobs j
           WHERE j.queue = q.queue AND j.state IN ('available', 'retryable') AND j.scheduled_at <= now()
           ORDER BY j.priority, j.scheduled_at
           LIMIT 1) head ON true
    ORDER BY q.queue`,
);

/**
 * An operator's hold (or its release) on a queue, written as a verdict. The
 * planner, when it runs, owns these columns too; an operator hold is a
 * verdict like any other and is subject to the readers' freshness window.
 */
export const SET_QUEUE_VERDICT = sql(
  'dashboard_set_queue_verdict',
  `INSERT INTO stampeded_queue_policies (queue, verdict, reason, decided_at)
   VALUES ($1, $2, $3, now())
   ON CONFLICT (queue) DO UPDATE
      SET verdict = excluded.verdict, reason = excluded.reason, decided_at = now(), updated_at = now()
   RETURNING queue, verdict, reason, decided_at`,
);
