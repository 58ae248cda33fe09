-- stampeded_release for a server before PostgreSQL 18, which has no
-- RETURNING OLD. No read ahead is needed: only a job in 'executing' is
-- released, so that is the state it was in. Same signature and result as
-- the seed's (stampeded_release.sql).
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
    RETURNING 'executing'::text, state, true;
$$;
