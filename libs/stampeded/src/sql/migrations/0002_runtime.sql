-- Migration 2: what the NestJS runtime needs beyond the seed.

-- Cancel, fenced like every other outcome.
--
-- Clearing claimed_by is the fence: stampeded_complete, stampeded_fail,
-- stampeded_touch and stampeded_checkpoint all match on claimed_by, so from
-- the moment this commits no worker can record an outcome for the job. The
-- notification tells the worker that runs it to fire the handler's
-- AbortSignal; it is a courtesy, the fence does not depend on it.
CREATE FUNCTION stampeded_cancel(p_id uuid, p_queue text DEFAULT NULL)
RETURNS TABLE (was text, now_state text, queue text, worker_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    j stampeded_jobs%ROWTYPE;
BEGIN
    SELECT * INTO j FROM stampeded_jobs
     WHERE id = p_id AND (p_queue IS NULL OR stampeded_jobs.queue = p_queue)
     FOR UPDATE;
    IF NOT FOUND THEN
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
           -- A cancelled job frees its dedup slot, as every terminal state does.
           dedup_scope  = NULL
     WHERE stampeded_jobs.queue = j.queue AND id = j.id;

    IF j.claimed_by IS NOT NULL THEN
        PERFORM pg_notify(current_schema() || '.stampeded_cancel', j.id::text);
    END IF;

    RETURN QUERY SELECT j.state, 'cancelled'::text, j.queue, j.claimed_by;
END;
$$;

-- Run a finished-badly or waiting job again: a discarded or cancelled job gets
-- a fresh attempt budget; a job waiting for its backoff or its runAt runs now.
-- Its error history is kept: a retried job that fails again should show both.
CREATE FUNCTION stampeded_retry(p_id uuid, p_queue text DEFAULT NULL)
RETURNS TABLE (was text, now_state text, queue text)
LANGUAGE plpgsql AS $$
DECLARE
    j stampeded_jobs%ROWTYPE;
BEGIN
    SELECT * INTO j FROM stampeded_jobs
     WHERE id = p_id AND (p_queue IS NULL OR stampeded_jobs.queue = p_queue)
     FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF j.state NOT IN ('discarded', 'cancelled', 'retryable', 'available') THEN
        RETURN QUERY SELECT j.state, j.state, j.queue;
        RETURN;
    END IF;

    UPDATE stampeded_jobs
       SET state         = 'available',
           scheduled_at  = now(),
           attempt       = CASE WHEN j.state IN ('discarded', 'cancelled') THEN 0 ELSE attempt END,
           interruptions = CASE WHEN j.state IN ('discarded', 'cancelled') THEN 0 ELSE interruptions END,
           deferrals     = CASE WHEN j.state IN ('discarded', 'cancelled') THEN 0 ELSE deferrals END,
           -- stampeded_release reads failure_kind to tell a fresh job from a
           -- retried one; a job given a fresh budget is a fresh job.
           failure_kind  = CASE WHEN j.state IN ('discarded', 'cancelled') THEN NULL ELSE failure_kind END,
           finished_at   = NULL
     WHERE stampeded_jobs.queue = j.queue AND id = j.id;

    RETURN QUERY SELECT j.state, 'available'::text, j.queue;
END;
$$;

-- Completion of a whole batch in one statement, still fenced job by job.
--
-- One statement instead of one per job because the commit is the bottleneck:
-- each statement pays a WAL flush and an UPSERT on the counters' hot rows,
-- and the counter trigger nets a statement's transitions into one row per
-- (queue, state). A job in the batch that this worker no longer owns, or whose
-- attempt has moved on, is simply not matched: the batch records nothing for
-- it and reports only the jobs it did complete.
CREATE FUNCTION stampeded_complete_many(
    p_worker_id uuid,
    p_queues    text[],
    p_ids       uuid[],
    p_attempts  smallint[]
) RETURNS TABLE (id uuid, queue text)
LANGUAGE sql AS $$
    UPDATE stampeded_jobs j
       SET state       = 'completed',
           finished_at = now(),
           dedup_scope = NULL,
           checkpoint  = NULL,
           claimed_by  = NULL
      FROM unnest(p_queues, p_ids, p_attempts) AS o(queue, id, attempt)
     WHERE j.queue      = o.queue
       AND j.id         = o.id
       AND j.claimed_by = p_worker_id
       AND j.attempt    = o.attempt
    RETURNING j.id, j.queue;
$$;

-- Every function runs with the search_path of the schema it was installed in.
--
-- The seed's functions name their tables unqualified and build the NOTIFY
-- channel from current_schema(), so they resolve against the CALLER's
-- search_path. An enqueue inside the application's own transaction runs on the
-- application's connection, whose search_path is its own: the insert triggers
-- then counted into (or failed on) another schema's stampeded_queue_counts,
-- and notified "public.stampeded_insert" for a queue installed elsewhere, so
-- that schema's workers slept until their next poll. Pinned, the functions
-- mean the same thing whoever calls them. pg_temp last, so a temporary table
-- cannot shadow ours.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace = current_schema()::regnamespace
           AND p.proname LIKE 'stampeded\_%'
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, current_schema());
    END LOOP;
END $$;
