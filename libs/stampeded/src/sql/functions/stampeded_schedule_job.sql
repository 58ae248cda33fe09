-- The job a schedule fires, with its task's job options as the schedule
-- stored them (job_options), removeOnComplete included.
--
-- A schedule with an ordering key (job_options.ordering_key) fires its jobs
-- into that key's line: the job's place is its id, drawn by the insert, and
-- it waits in 'pending' when its key has an unfinished job, as an enqueued
-- one does (docs/ordering.md). The key and the state are set by an update
-- of the row just inserted, made only for such a schedule.
CREATE OR REPLACE FUNCTION stampeded_schedule_job(s stampeded_schedules) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_key text := s.job_options->>'ordering_key';
    v_id  uuid;
BEGIN
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
    RETURNING id INTO v_id;

    IF v_key IS NOT NULL THEN
        UPDATE stampeded_jobs j
           SET ordering_key      = v_key,
               ordering_position = v_id,
               state = CASE WHEN EXISTS (SELECT 1 FROM stampeded_jobs u
                                          WHERE u.queue = s.queue AND u.ordering_key = v_key
                                            AND u.state = 'pending' AND u.deps_pending IS NULL)
                              OR EXISTS (SELECT 1 FROM stampeded_jobs u
                                          WHERE u.queue = s.queue AND u.ordering_key = v_key
                                            AND u.state IN ('available','claimed','executing','retryable'))
                            THEN 'pending' ELSE 'available' END
         WHERE j.queue = s.queue AND j.id = v_id;
    END IF;

    RETURN v_id;
END;
$$;
