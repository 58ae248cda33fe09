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

export const SET_SCHEDULE_PAUSED = sql(
  'dashboard_set_schedule_paused',
  `UPDATE stampeded_schedules SET paused = $2, updated_at = now() WHERE key = $1 RETURNING key, paused`,
);

/**
 * Runs a schedule once, now: its job, enqueued as the scheduler would, outside
 * the occurrence ledger. Its regular runs are left alone: next_run_at is not
 * touched, so the scheduler neither skips nor repeats an occurrence for it.
 */
export const TRIGGER_SCHEDULE = sql(
  'dashboard_trigger_schedule',
  `INSERT INTO stampeded_jobs (queue, task, args, meta, tenant_id, priority)
   SELECT queue, task, args, meta, tenant_id, priority FROM stampeded_schedules WHERE key = $1
   RETURNING id::text AS id, queue`,
);
