-- The seed's claim, which other runtimes call, with its signature and result:
-- the worker's plain claim (stampeded_claim_batch), answered as whole rows in
-- claim order. So a job with an ordering key (migration 11) waits for its
-- turn here too, and a runtime that knows nothing of keys still runs a key's
-- jobs one at a time and in order; a job without a key is claimed as the
-- seed claims it. The claimed rows are read in a statement of their own: a
-- read in the claim's statement sees them as they were before it.
CREATE OR REPLACE FUNCTION stampeded_claim(
    p_queue     text,
    p_worker_id uuid,
    p_limit     integer DEFAULT 1,

    p_now       timestamptz DEFAULT NULL
) RETURNS SETOF stampeded_jobs
LANGUAGE plpgsql AS $$
DECLARE
    v_ids uuid[];
BEGIN
    v_ids := ARRAY(SELECT b.id FROM stampeded_claim_batch(p_queue, p_worker_id, p_limit, p_now) b);
    RETURN QUERY
    SELECT j.* FROM stampeded_jobs j
     WHERE j.queue = p_queue AND j.id = ANY (v_ids)
     ORDER BY j.priority, j.scheduled_at;
END;
$$;
