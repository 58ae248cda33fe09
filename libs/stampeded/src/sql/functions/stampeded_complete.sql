-- The seed's stampeded_complete, for other runtimes that call it (the
-- runtime here completes through stampeded_complete_many), with one change:
-- a completed workflow or keyed job releases the jobs waiting for it
-- (stampeded_release_waiting: its workflow dependents, the next job of its
-- key) and its debounce follow-up (stampeded_release_follow_ups), in the
-- same statement, as the runtime's completion does, so that a
-- runtime that knows nothing of workflows and keys leaves nothing waiting.
-- A job with neither is completed as the seed completes it. Its RETURNING
-- OLD/NEW is PostgreSQL 18's: stampeded_complete.pre18.sql is the form for
-- an older server, and this file puts this one back on a server upgraded
-- to 18.
CREATE OR REPLACE FUNCTION stampeded_complete(
    p_queue     text,
    p_id        uuid,
    p_worker_id uuid,
    p_attempt   smallint
) RETURNS TABLE (was text, now_state text, owned boolean)
LANGUAGE sql AS $$
    WITH done AS (
        UPDATE stampeded_jobs
           SET state       = 'completed',
               finished_at = now(),
               dedup_scope = NULL,
               -- Dead weight once the job is done, on the one table that already
               -- has the bloat problem. Consistent with the fire-and-forget
               -- decision: we do not keep results either.
               checkpoint  = NULL,
               claimed_by  = NULL
         WHERE queue = p_queue
           AND id    = p_id
           AND claimed_by = p_worker_id   -- refuse to complete a job we no longer own
             AND attempt    = p_attempt     -- ...and refuse a PREVIOUS attempt's result
        RETURNING OLD.state AS was, NEW.state AS now_state, queue, id, workflow_id, ordering_key
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
