-- The seed's stampeded_complete, as the seed has it, for other runtimes that
-- call it (the runtime here completes through stampeded_complete_many). Its
-- RETURNING OLD/NEW is PostgreSQL 18's: stampeded_complete.pre18.sql is the
-- form for an older server, and this file puts the seed's back on a server
-- upgraded to 18.
CREATE OR REPLACE FUNCTION stampeded_complete(
    p_queue     text,
    p_id        uuid,
    p_worker_id uuid,
    p_attempt   smallint
) RETURNS TABLE (was text, now_state text, owned boolean)
LANGUAGE sql AS $$
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
    RETURNING OLD.state, NEW.state, true;
$$;
