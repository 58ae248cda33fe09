-- Releases the debounce follow-ups of jobs that finished (migration 17,
-- docs/enqueue.md, "Debounce"): the one home of that step, called by every
-- function that ends a job (stampeded_complete_many, stampeded_complete,
-- stampeded_fail and stampeded_reap when the job is discarded,
-- stampeded_cancel, stampeded_discard), in the outcome's statement and
-- transaction, after the job has given up its scope.
--
-- p_queues and p_ids are the finished jobs. Each one's follow-up, if it has
-- one, takes the scope (dedup_scope, so the dedup index holds it from this
-- commit on) and becomes 'available': at its own run time, or at once when
-- that has passed (scheduled_at at now(), where a claim cursor reads it).
-- The key moves inside one transaction: the finished job's entry is gone
-- for it, and a concurrent enqueue of the scope waits for this commit and
-- then finds the follow-up as the scope's waiting job.
--
-- A job that waits to retry still holds its scope, and keeps its follow-up:
-- only a finished job comes here.
--
-- None is lost to a race with the enqueue: the request that inserts a
-- follow-up locks the running job FOR SHARE first (ENQUEUE_DEBOUNCE in
-- sql/enqueue.sql.ts), so an outcome that changes that job waits for the
-- enqueue's commit, and this statement, which runs after, sees the
-- follow-up; an outcome that committed first leaves nothing to lock, and the
-- request takes the scope itself.
--
-- Wakes the workers of the released jobs' queues as an insert does. Returns
-- how many follow-ups were released.
CREATE OR REPLACE FUNCTION stampeded_release_follow_ups(
    p_queues text[],
    p_ids    uuid[]
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    f_queues   text[];
    f_ids      uuid[];
    r_queues   text[];
    v_released integer;
BEGIN
    -- Found by a read first, and updated only when there is one: an UPDATE
    -- runs the counters' statement trigger even when it changes no row,
    -- and nearly every finished job has no follow-up (bench/RESULTS.md,
    -- "Debounce follow-ups").
    SELECT array_agg(f.queue), array_agg(f.id)
      INTO f_queues, f_ids
      FROM stampeded_jobs f
     WHERE f.queue = ANY (p_queues)
       AND f.dedup_follows = ANY (p_ids)
       AND f.state = 'pending';
    IF f_ids IS NULL THEN
        RETURN 0;
    END IF;

    WITH released AS (
        UPDATE stampeded_jobs f
           SET state              = 'available',
               dedup_scope        = f.dedup_follow_scope,
               dedup_follow_scope = NULL,
               dedup_follows      = NULL,
               scheduled_at       = greatest(f.scheduled_at, now())
         WHERE f.queue = ANY (f_queues)
           AND f.id    = ANY (f_ids)
           -- Still waiting behind its job: a cancel under way clears both.
           AND f.state = 'pending'
           AND f.dedup_follows IS NOT NULL
        RETURNING f.queue
    )
    SELECT array_agg(DISTINCT r.queue), count(*)
      INTO r_queues, v_released
      FROM released r;

    IF r_queues IS NOT NULL THEN
        PERFORM pg_notify(current_schema() || '.stampeded_insert', q) FROM unnest(r_queues) AS q;
    END IF;
    RETURN v_released;
END;
$$;
