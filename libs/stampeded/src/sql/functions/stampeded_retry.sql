-- Run a finished-badly or waiting job again: a discarded or cancelled job gets
-- a fresh attempt budget; a job waiting for its backoff or its runAt runs now.
-- Its error history is kept: a retried job that fails again should show both.
-- A finished workflow job retried leaves its workflow: the jobs that waited
-- for it were settled by its first outcome, and must not count it twice.
CREATE OR REPLACE FUNCTION stampeded_retry(p_id uuid, p_queue text DEFAULT NULL)
RETURNS TABLE (was text, now_state text, queue text)
LANGUAGE plpgsql AS $$
DECLARE
    j stampeded_jobs%ROWTYPE;
BEGIN
    j := stampeded_lock_job(p_id, p_queue);
    IF j.id IS NULL THEN
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
           finished_at   = NULL,
           workflow_id   = CASE WHEN j.state IN ('discarded', 'cancelled') THEN NULL ELSE workflow_id END
     WHERE stampeded_jobs.queue = j.queue AND id = j.id;

    RETURN QUERY SELECT j.state, 'available'::text, j.queue;
END;
$$;
