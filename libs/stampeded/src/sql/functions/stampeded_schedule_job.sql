-- The job a schedule fires, with its task's job options as the schedule
-- stored them (job_options), removeOnComplete included.
CREATE OR REPLACE FUNCTION stampeded_schedule_job(s stampeded_schedules) RETURNS uuid
LANGUAGE sql AS $$
    INSERT INTO stampeded_jobs
        (queue, task, args, meta, tenant_id, priority,
         expire_seconds, max_attempts, backoff_base_ms, backoff_base_wide_ms, backoff_max_ms,
         max_interruptions, max_deferrals, dead_letter_queue, remove_on_complete)
    VALUES
        (s.queue, s.task, s.args, s.meta, s.tenant_id, s.priority,
         coalesce((s.job_options->>'expire_seconds')::integer, 3600),
         coalesce((s.job_options->>'max_attempts')::smallint, 25),
         coalesce((s.job_options->>'backoff_base_ms')::smallint, 1000),
         (s.job_options->>'backoff_base_wide_ms')::integer,
         coalesce((s.job_options->>'backoff_max_ms')::integer, 3600000),
         coalesce((s.job_options->>'max_interruptions')::smallint, 1),
         coalesce((s.job_options->>'max_deferrals')::smallint, 100),
         s.job_options->>'dead_letter_queue',
         coalesce((s.job_options->>'remove_on_complete')::boolean, false))
    RETURNING id;
$$;
