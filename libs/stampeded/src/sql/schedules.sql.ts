import { sql } from './statement.js';

const SCHEDULE_COLUMNS = `
  key, queue, task, args, tenant_id, priority, interval_secs::float8 AS interval_secs, cron_expr,
  next_run_at, last_run_at, dst_policy, timezone, missed_policy, paused, created_at, updated_at,
  job_options->>'ordering_key' AS ordering_key`;

/**
 * Creates or updates a schedule under its key. What a deploy changes (task,
 * args, queue, rule) is written; what the fleet or an operator owns is kept:
 * next_run_at unless the rule itself changed (a restart must not move the
 * next occurrence, or a fleet restarting one process at a time would keep
 * pushing a nightly job into tomorrow), and paused unless the caller says.
 */
export const UPSERT_SCHEDULE = sql(
  'schedules_upsert_schedule',
  `
INSERT INTO stampeded_schedules AS s
       (key, queue, task, args, meta, tenant_id, priority, interval_secs, cron_expr,
        next_run_at, dst_policy, timezone, missed_policy, paused, job_options)
VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, $6, $7, $8, $9, $10, $11, $12, $13, coalesce($14::boolean, false), $15::jsonb)
ON CONFLICT (key) DO UPDATE SET
       queue         = excluded.queue,
       task          = excluded.task,
       args          = excluded.args,
       meta          = s.meta || excluded.meta,
       tenant_id     = excluded.tenant_id,
       priority      = excluded.priority,
       job_options   = excluded.job_options,
       next_run_at   = CASE WHEN s.interval_secs IS DISTINCT FROM excluded.interval_secs
                              OR s.cron_expr     IS DISTINCT FROM excluded.cron_expr
                              OR s.timezone      <> excluded.timezone
                              OR s.dst_policy    <> excluded.dst_policy
                            THEN excluded.next_run_at ELSE s.next_run_at END,
       interval_secs = excluded.interval_secs,
       cron_expr     = excluded.cron_expr,
       dst_policy    = excluded.dst_policy,
       timezone      = excluded.timezone,
       missed_policy = excluded.missed_policy,
       paused        = coalesce($14::boolean, s.paused),
       updated_at    = now()
RETURNING ${SCHEDULE_COLUMNS}`,
);

export const LIST_SCHEDULES = sql('schedules_list_schedules', `SELECT ${SCHEDULE_COLUMNS} FROM stampeded_schedules ORDER BY key`);

export const GET_SCHEDULE = sql('schedules_get_schedule', `SELECT ${SCHEDULE_COLUMNS} FROM stampeded_schedules WHERE key = $1`);

export const SET_SCHEDULE_PAUSED = sql(
  'schedules_set_schedule_paused',
  `UPDATE stampeded_schedules SET paused = $2, updated_at = now() WHERE key = $1 RETURNING ${SCHEDULE_COLUMNS}`,
);

/** Its occurrence ledger goes with it (ON DELETE CASCADE). */
export const REMOVE_SCHEDULE = sql('schedules_remove_schedule', `DELETE FROM stampeded_schedules WHERE key = $1 RETURNING key`);

/**
 * Row-locked until the transaction that fires them ends. Each row comes with
 * the time it was judged due at -- the test clock's, or the server's -- so
 * that lateness is measured on the clock that claimed it and not on this
 * process's own, which may be skewed.
 */
export const CLAIM_DUE_SCHEDULES = sql(
  'schedules_claim_due_schedules',
  `SELECT ${SCHEDULE_COLUMNS}, coalesce($2::timestamptz, now()) AS claimed_at
     FROM stampeded_claim_due_schedules($1, $2::timestamptz)`,
);

/** Null when the occurrence was already in the ledger: another process fired it. */
export const FIRE_SCHEDULE = sql('schedules_fire_schedule', `SELECT stampeded_fire_schedule($1, $2)::text AS job_id`);

/** A missed occurrence under missed_policy 'skip': no job, no ledger row, just the next run. */
export const SKIP_TO_NEXT_RUN = sql('schedules_skip_schedule', `UPDATE stampeded_schedules SET next_run_at = $2, updated_at = now() WHERE key = $1`);

/**
 * Fire now, outside the rhythm: the job is enqueued as an occurrence's is
 * (stampeded_schedule_job: the stored job options, the ordering key) and
 * recorded in the ledger under a token of its own, which no occurrence of
 * the rhythm can take, and next_run_at is left alone. The one trigger:
 * SchedulesService.trigger(), the dashboard and the CLI all run it.
 */
export const TRIGGER_SCHEDULE = sql(
  'schedules_trigger_schedule',
  `
WITH job AS (
    SELECT stampeded_schedule_job(s) AS id, s.queue FROM stampeded_schedules s WHERE s.key = $1
),
occurrence AS (
    INSERT INTO stampeded_cron_occurrences (cron_key, occurrence_token, job_id)
    SELECT $1, 'trigger:' || job.id::text, job.id FROM job
    RETURNING 1
)
SELECT id::text AS job_id, queue FROM job`,
);

export const LIST_OCCURRENCES = sql(
  'schedules_list_occurrences',
  `SELECT occurrence_token, job_id::text AS job_id, enqueued_at
     FROM stampeded_cron_occurrences WHERE cron_key = $1 ORDER BY id DESC LIMIT $2`,
);

/** The server must know the zone too: the wall_clock occurrence token is computed with AT TIME ZONE. */
export const SERVER_KNOWS_ZONE = sql(
  'schedules_server_knows_zone',
  `SELECT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = $1) AS known, now() AS server_now`,
);
