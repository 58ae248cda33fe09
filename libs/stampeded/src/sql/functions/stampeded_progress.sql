-- A running job's progress (ctx.progress()), fenced as a touch is: written
-- only while p_worker_id holds attempt p_attempt of the job and it is
-- executing; no row comes back when it is no longer ours, and nothing is
-- written. It counts as a touch, as a checkpoint does: a handler that
-- reports progress is alive. Neither column it writes is indexed, so the
-- update can stay on its page (HOT).
CREATE OR REPLACE FUNCTION stampeded_progress(
    p_queue     text,
    p_id        uuid,
    p_worker_id uuid,
    p_attempt   smallint,
    p_progress  jsonb
) RETURNS boolean
LANGUAGE sql AS $$
    UPDATE stampeded_jobs
       SET progress     = p_progress,
           heartbeat_at = now()
     WHERE queue = p_queue AND id = p_id
       AND claimed_by = p_worker_id AND state = 'executing'
       AND attempt = p_attempt
    RETURNING true;
$$;
