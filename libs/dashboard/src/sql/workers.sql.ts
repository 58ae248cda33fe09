import { sql } from '@stampeded/nestjs/internal';

/** Workers with their heartbeat age and how many jobs each holds, through the claimed_by partial index. */
export const WORKERS = sql(
  'dashboard_workers',
  `SELECT w.id::text AS id, w.hostname, w.pid, w.queues, w.metadata, w.started_at, w.last_heartbeat,
          extract(epoch FROM now() - w.last_heartbeat)::float8 AS silent_secs,
          coalesce(r.running, 0)::int AS running
     FROM stampeded_workers w
     LEFT JOIN (
          SELECT claimed_by, count(*) AS running FROM stampeded_jobs
           WHERE state IN ('claimed', 'executing')
           GROUP BY claimed_by) r ON r.claimed_by = w.id
    ORDER BY w.started_at`,
);

/** Jobs running now, grouped by worker, through the same partial index. */
export const RUNNING_JOBS = sql(
  'dashboard_running_jobs',
  `SELECT id::text AS id, queue, task, claimed_by::text AS claimed_by, claimed_at, heartbeat_at, attempt
     FROM stampeded_jobs
    WHERE state IN ('claimed', 'executing')
    ORDER BY claimed_by
    LIMIT $1`,
);
