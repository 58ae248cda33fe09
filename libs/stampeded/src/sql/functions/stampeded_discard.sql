-- An operator's discard (the dashboard's, one job or a filter's batch): a
-- waiting job is finished as failed without running again. Only a waiting
-- job ('available' or 'retryable'): a running one is cancelled instead
-- (stampeded_cancel), which fences its worker. No dead-letter copy: the
-- operator chose to drop it. p_error is what it records as the job's last
-- error. A discarded workflow or keyed job releases what waits for it
-- (stampeded_release_waiting), and a job that held a dedup scope its debounce
-- follow-up (stampeded_release_follow_ups), as every outcome does.
--
-- Answers the state before and after, equal when the job was not waiting
-- (nothing changed); no row when there is no such job.
CREATE OR REPLACE FUNCTION stampeded_discard(p_id uuid, p_queue text, p_error text)
RETURNS TABLE (was text, now_state text, queue text)
LANGUAGE plpgsql AS $$
DECLARE
    j stampeded_jobs%ROWTYPE;
BEGIN
    j := stampeded_lock_job(p_id, p_queue);
    IF j.id IS NULL THEN
        RETURN;
    END IF;
    IF j.state NOT IN ('available', 'retryable') THEN
        RETURN QUERY SELECT j.state, j.state, j.queue;
        RETURN;
    END IF;

    UPDATE stampeded_jobs
       SET state        = 'discarded',
           failure_kind = 'unrecoverable',
           last_error   = left(p_error, 4000),
           finished_at  = now(),
           dedup_scope  = NULL
     WHERE stampeded_jobs.queue = j.queue AND id = j.id;

    IF j.workflow_id IS NOT NULL OR j.ordering_key IS NOT NULL THEN
        PERFORM stampeded_release_waiting('discarded', ARRAY[j.queue], ARRAY[j.id], ARRAY[j.workflow_id], ARRAY[j.ordering_key]);
    END IF;

    IF j.dedup_scope IS NOT NULL THEN
        PERFORM stampeded_release_follow_ups(ARRAY[j.queue], ARRAY[j.id]);
    END IF;

    RETURN QUERY SELECT j.state, 'discarded'::text, j.queue;
END;
$$;
