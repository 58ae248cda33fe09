-- The worker's batched completion, with removal on completion. Both
-- statements find the batch's rows through the primary key and keep the
-- fence: a job is completed, or removed, only while this worker holds the
-- attempt it was given. They touch disjoint rows (remove_on_complete is set
-- when a job is enqueued and never changes).
--
-- The UPDATE of the kept jobs runs first; the DELETE runs only when the
-- UPDATE did not account for the whole batch, which is when the batch has
-- jobs to remove (or jobs whose fence failed: the DELETE then finds none).
-- A batch with nothing to remove, the default, is one statement: no second
-- lookup of its rows and no DELETE trigger run over empty transition tables
-- (bench/RESULTS.md, "The completion's second statement"). A batch of
-- removed jobs runs both, as it always did.
--
-- p_results holds each job's result, in the order of p_ids, NULL for a job
-- that has none; NULL as a whole when no job of the batch has one, which is
-- the common case and costs what a completion without results did
-- (bench/RESULTS.md). A removed job's result goes with it, and so do its
-- log lines (migration 16), through their primary key: a batch with nothing
-- to remove never runs that statement.
--
-- Workflow and keyed jobs of the batch release the jobs waiting for them
-- (stampeded_release_waiting: workflow dependents, and the next job of each
-- key), in this statement and transaction: one call for the whole batch,
-- made only when the batch has one. The debounce follow-ups of the batch's
-- jobs are released the same way (stampeded_release_follow_ups), one call
-- for every batch: nothing in the completed row says whether a follow-up
-- waits for it, and the call reads an index that is empty unless one does
-- (bench/RESULTS.md, "Debounce follow-ups").
CREATE OR REPLACE FUNCTION stampeded_complete_many(
    p_worker_id uuid,
    p_queues    text[],
    p_ids       uuid[],
    p_attempts  smallint[],
    p_results   jsonb[] DEFAULT NULL
) RETURNS TABLE (id uuid, queue text)
LANGUAGE plpgsql
SET enable_nestloop = off
-- One plan for every call: a custom plan per call re-reads every
-- partition's CHECK constraints (NOTES.md, "Planning the hot statements").
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_ids       uuid[];
    v_queues    text[];
    v_workflows uuid[];
    v_keys      text[];
    v_waiters   integer;
BEGIN
    WITH kept AS (
        UPDATE stampeded_jobs j
           SET state       = 'completed',
               finished_at = now(),
               dedup_scope = NULL,
               checkpoint  = NULL,
               claimed_by  = NULL,
               result      = o.result
          FROM unnest(p_queues, p_ids, p_attempts, p_results) AS o(queue, id, attempt, result)
         WHERE j.queue      = ANY (p_queues)
           AND j.id         = ANY (p_ids)
           AND j.queue      = o.queue
           AND j.id         = o.id
           AND j.claimed_by = p_worker_id
           AND j.attempt    = o.attempt
           AND NOT j.remove_on_complete
        RETURNING j.id, j.queue, j.workflow_id, j.ordering_key
    )
    SELECT coalesce(array_agg(k.id), '{}'), coalesce(array_agg(k.queue), '{}'),
           array_agg(k.workflow_id), array_agg(k.ordering_key),
           count(*) FILTER (WHERE k.workflow_id IS NOT NULL OR k.ordering_key IS NOT NULL)
      INTO v_ids, v_queues, v_workflows, v_keys, v_waiters
      FROM kept k;

    IF cardinality(v_ids) < cardinality(p_ids) THEN
        WITH removed AS (
            DELETE FROM stampeded_jobs j
             USING unnest(p_queues, p_ids, p_attempts) AS o(queue, id, attempt)
             WHERE j.queue      = ANY (p_queues)
               AND j.id         = ANY (p_ids)
               AND j.queue      = o.queue
               AND j.id         = o.id
               AND j.claimed_by = p_worker_id
               AND j.attempt    = o.attempt
               AND j.remove_on_complete
            RETURNING j.id, j.queue, j.workflow_id, j.ordering_key
        ),
        logs AS (
            DELETE FROM stampeded_job_logs l
             WHERE l.job_id = ANY (ARRAY(SELECT r.id FROM removed r))
        )
        SELECT v_ids || coalesce(array_agg(r.id), '{}'), v_queues || coalesce(array_agg(r.queue), '{}'),
               v_workflows || array_agg(r.workflow_id), v_keys || array_agg(r.ordering_key),
               v_waiters + count(*) FILTER (WHERE r.workflow_id IS NOT NULL OR r.ordering_key IS NOT NULL)
          INTO v_ids, v_queues, v_workflows, v_keys, v_waiters
          FROM removed r;
    END IF;

    IF v_waiters > 0 THEN
        PERFORM stampeded_release_waiting('completed', v_queues, v_ids, v_workflows, v_keys);
    END IF;
    PERFORM stampeded_release_follow_ups(v_queues, v_ids);

    RETURN QUERY SELECT u.id, u.queue FROM unnest(v_ids, v_queues) AS u(id, queue);
END;
$$;
