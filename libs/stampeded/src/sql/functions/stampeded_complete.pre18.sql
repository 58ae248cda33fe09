-- stampeded_complete for a server before PostgreSQL 18, which has no
-- RETURNING OLD: the state the job was in is read, and the row locked, by a
-- SELECT ... FOR UPDATE ahead of the UPDATE. The lock re-reads a row changed
-- since the statement's snapshot (as the UPDATE alone would), so the state
-- returned is the one the UPDATE changed. Same signature and result as the
-- seed's (stampeded_complete.sql).
CREATE OR REPLACE FUNCTION stampeded_complete(
    p_queue     text,
    p_id        uuid,
    p_worker_id uuid,
    p_attempt   smallint
) RETURNS TABLE (was text, now_state text, owned boolean)
LANGUAGE sql AS $$
    WITH old AS MATERIALIZED (
        SELECT state FROM stampeded_jobs
         WHERE queue = p_queue
           AND id    = p_id
           AND claimed_by = p_worker_id
           AND attempt    = p_attempt
           FOR UPDATE
    )
    UPDATE stampeded_jobs j
       SET state       = 'completed',
           finished_at = now(),
           dedup_scope = NULL,
           checkpoint  = NULL,
           claimed_by  = NULL
      FROM old
     WHERE j.queue = p_queue
       AND j.id    = p_id
       AND j.claimed_by = p_worker_id
       AND j.attempt    = p_attempt
    RETURNING old.state, j.state, true;
$$;
