-- stampeded_complete for a server before PostgreSQL 18, which has no
-- RETURNING OLD: the state the job was in is read, and the row locked, by a
-- SELECT ... FOR UPDATE ahead of the UPDATE. The lock re-reads a row changed
-- since the statement's snapshot (as the UPDATE alone would), so the state
-- returned is the one the UPDATE changed. Same signature, result and release
-- of what waits as stampeded_complete.sql.
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
    ),
    done AS (
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
        RETURNING old.state AS was, j.state AS now_state, j.queue, j.id, j.workflow_id, j.ordering_key
    ),
    released AS (
        SELECT stampeded_release_waiting('completed', array_agg(d.queue), array_agg(d.id),
                                         array_agg(d.workflow_id), array_agg(d.ordering_key)) AS n
          FROM done d
         WHERE d.workflow_id IS NOT NULL OR d.ordering_key IS NOT NULL
        HAVING count(*) > 0
    ),
    followed AS (
        SELECT stampeded_release_follow_ups(array_agg(d.queue), array_agg(d.id)) AS n
          FROM done d
        HAVING count(*) > 0
    )
    -- Evaluated once, before the first row: they run the releases.
    SELECT d.was, d.now_state, true FROM done d
     WHERE (SELECT count(*) FROM released) >= 0
       AND (SELECT count(*) FROM followed) >= 0;
$$;
