-- Fires one occurrence of a schedule: the occurrence ledger
-- first (a token already there means another process fired it, and only
-- next_run_at moves), then the job with its options.
CREATE OR REPLACE FUNCTION stampeded_fire_schedule(p_key text, p_next_run_at timestamptz)
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    s        stampeded_schedules%ROWTYPE;
    v_token  text;
    v_job    uuid;
    -- Separate from v_job: the ledger's id is bigserial, the job's is uuid.
    v_occ    bigint;
BEGIN
    SELECT * INTO s FROM stampeded_schedules WHERE key = p_key;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;

    v_token := CASE s.dst_policy
        WHEN 'wall_clock' THEN
            to_char(s.next_run_at AT TIME ZONE s.timezone, 'YYYY-MM-DD HH24:MI')
        ELSE
            extract(epoch FROM s.next_run_at)::bigint::text
    END;

    INSERT INTO stampeded_cron_occurrences (cron_key, occurrence_token)
    VALUES (s.key, v_token)
    ON CONFLICT (cron_key, occurrence_token) DO NOTHING
    RETURNING id INTO v_occ;

    IF v_occ IS NULL THEN
        UPDATE stampeded_schedules
           SET next_run_at = p_next_run_at, updated_at = now()
         WHERE key = s.key;
        RETURN NULL;
    END IF;

    v_job := stampeded_schedule_job(s);

    UPDATE stampeded_cron_occurrences
       SET job_id = v_job
     WHERE id = v_occ;

    UPDATE stampeded_schedules
       SET next_run_at = p_next_run_at, last_run_at = now(), updated_at = now()
     WHERE key = s.key;

    RETURN v_job;
END;
$$;
