-- Cancel, fenced like every other outcome.
--
-- Clearing claimed_by is the fence: stampeded_complete, stampeded_fail,
-- stampeded_touch and stampeded_checkpoint all match on claimed_by, so from
-- the moment this commits no worker can record an outcome for the job. The
-- notification tells the worker that runs it to fire the handler's
-- AbortSignal; it is a courtesy, the fence does not depend on it. A
-- cancelled workflow or keyed job releases the jobs waiting for it
-- (stampeded_release_waiting) in the same transaction: a keyed job
-- cancelled while it waits in its key's order lets the next one through when it
-- was the head. A cancelled job that held a dedup scope releases its debounce
-- follow-up (stampeded_release_follow_ups), which takes the scope.
CREATE OR REPLACE FUNCTION stampeded_cancel(p_id uuid, p_queue text DEFAULT NULL)
RETURNS TABLE (was text, now_state text, queue text, worker_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    j stampeded_jobs%ROWTYPE;
BEGIN
    j := stampeded_lock_job(p_id, p_queue);
    IF j.id IS NULL THEN
        RETURN;
    END IF;
    IF j.state IN ('completed', 'discarded', 'cancelled') THEN
        RETURN QUERY SELECT j.state, j.state, j.queue, NULL::uuid;
        RETURN;
    END IF;

    UPDATE stampeded_jobs
       SET state        = 'cancelled',
           failure_kind = 'cancelled',
           finished_at  = now(),
           claimed_by   = NULL,
           claimed_at   = NULL,
           heartbeat_at = NULL,
           -- A cancelled job frees its dedup slot, as every terminal state does,
           -- and a cancelled follow-up its place behind its scope's job.
           dedup_scope  = NULL,
           dedup_follows      = NULL,
           dedup_follow_scope = NULL
     WHERE stampeded_jobs.queue = j.queue AND id = j.id;

    IF j.workflow_id IS NOT NULL OR j.ordering_key IS NOT NULL THEN
        PERFORM stampeded_release_waiting('cancelled', ARRAY[j.queue], ARRAY[j.id], ARRAY[j.workflow_id], ARRAY[j.ordering_key]);
    END IF;

    IF j.dedup_scope IS NOT NULL THEN
        PERFORM stampeded_release_follow_ups(ARRAY[j.queue], ARRAY[j.id]);
    END IF;

    IF j.claimed_by IS NOT NULL THEN
        PERFORM pg_notify(current_schema() || '.stampeded_cancel', j.id::text);
    END IF;

    RETURN QUERY SELECT j.state, 'cancelled'::text, j.queue, j.claimed_by;
END;
$$;
