-- The seed's stampeded_release, as the seed has it. Its RETURNING OLD/NEW is
-- PostgreSQL 18's: stampeded_release.pre18.sql is the form for an older
-- server, and this file puts the seed's back on a server upgraded to 18.
CREATE OR REPLACE FUNCTION stampeded_release(
    p_queue     text,
    p_id        uuid,
    p_worker_id uuid,
    p_attempt   smallint
) RETURNS TABLE (was text, now_state text, owned boolean)
LANGUAGE sql AS $$
    -- Undoes the claim and records nothing: a job its worker never started has not failed.
    UPDATE stampeded_jobs
       SET state        = CASE WHEN failure_kind IS NULL THEN 'available' ELSE 'retryable' END,
           attempt      = greatest(attempt - 1, 0),
           claimed_by   = NULL,
           claimed_at   = NULL,
           heartbeat_at = NULL
     WHERE queue = p_queue
       AND id    = p_id
       AND claimed_by = p_worker_id
       AND attempt    = p_attempt
       AND state      = 'executing'
    RETURNING OLD.state, NEW.state, true;
$$;
