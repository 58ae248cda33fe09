import { sql } from '@stampeded/nestjs/internal';

/** Every schedule, with its next run shown in its own time zone. */
export const SCHEDULES = sql(
  'dashboard_schedules',
  `SELECT key, queue, task, cron_expr, interval_secs, timezone, dst_policy, missed_policy, paused,
          next_run_at, last_run_at,
          to_char(next_run_at AT TIME ZONE timezone, 'YYYY-MM-DD HH24:MI:SS') AS next_run_local
     FROM stampeded_schedules
    ORDER BY key`,
);
