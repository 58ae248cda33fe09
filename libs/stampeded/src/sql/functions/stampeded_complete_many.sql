-- The worker's batched completion, with removal on completion. Both statements find the
-- batch's rows through the primary key and keep the fence: a job is
-- completed, or removed, only while this worker holds the attempt it was
-- given. They see the same snapshot and touch disjoint rows.
--
-- p_results holds each job's result, in the order of p_ids, NULL for a job
-- that has none; NULL as a whole when no job of the batch has one, which is
-- the common case and costs what a completion without results did
-- (bench/RESULTS.md). A removed job's result goes with it.
--
-- Workflow and keyed jobs of the batch release the jobs waiting for them
-- (stampeded_release_waiting: workflow dependents, and the next job of each
-- key), in this statement and transaction: one call for the whole batch,
-- made only when the batch has one. A batch without any reads its completed
-- rows once more, in memory, and calls nothing.
CREATE OR REPLACE FUNCTION stampeded_complete_many(
    p_worker_id uuid,
    p_queues    text[],
    p_ids       uuid[],
    p_attempts  smallint[],
    p_results   jsonb[] DEFAULT NULL
) RETURNS TABLE (id uuid, queue text)
LANGUAGE sql
SET enable_nestloop = off
-- One plan for every call: a custom plan per call re-reads every
-- partition's CHECK constraints (NOTES.md, "Planning the hot statements").
SET plan_cache_mode = force_generic_plan
AS $$
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
    kept AS (
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
    ),
    done AS (
        SELECT id, queue, workflow_id, ordering_key FROM removed
        UNION ALL
        SELECT id, queue, workflow_id, ordering_key FROM kept
    ),
    released AS (
        SELECT stampeded_release_waiting('completed', array_agg(d.queue), array_agg(d.id),
                                         array_agg(d.workflow_id), array_agg(d.ordering_key)) AS n
          FROM done d
         WHERE d.workflow_id IS NOT NULL OR d.ordering_key IS NOT NULL
        HAVING count(*) > 0
    )
    -- The condition is evaluated once, before the first row: it runs the
    -- release, which the result does not otherwise read.
    SELECT d.id, d.queue FROM done d
     WHERE (SELECT count(*) FROM released) >= 0;
$$;
