import { sql } from '@stampeded/nestjs/internal';

/** Jobs per queue and state, from the trigger-maintained counters: never count(*) over the jobs. */
export const QUEUE_COUNTS = sql(
  'dashboard_queue_counts',
  `SELECT queue, state, sum(n)::bigint AS n FROM stampeded_queue_counts GROUP BY queue, state ORDER BY queue, state`,
);

/**
 * Per queue: its policy, verdict and pause, and the job at the head of the claim
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
          coalesce(p.paused, false) AS paused, p.paused_by, p.pause_reason, p.paused_at, p.policy_by, p.policy_at,
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
