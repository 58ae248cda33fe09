-- What waits on jobs that finished, or that moved back in their key's order:
-- the one home of that decision, called by every function that ends a job
-- (stampeded_complete_many, stampeded_complete, stampeded_fail,
-- stampeded_cancel, stampeded_discard, stampeded_reap, the workflow cancel) and by the move of
-- a retry that gives up its place, in the outcome's statement and
-- transaction, only when one of the jobs has a workflow or a key: a plain
-- job never gets here.
--
-- p_outcome is the jobs' outcome ('completed', 'discarded', 'cancelled'), or
-- NULL for jobs that did not finish but went to the back of their key's order.
-- p_queues, p_ids, p_workflow_ids and p_keys are the jobs, one entry each,
-- with their workflow_id and ordering_key (NULL when they have none).
--
-- WORKFLOWS. The finished workflow jobs settle their dependents through
-- stampeded_workflow_advance, one call for all of them.
--
-- KEYS (migration 14, docs/ordering.md). A keyed job that is not at its
-- turn waits in state 'pending' with deps_pending NULL, outside the claim
-- index. For each key of the jobs, its first waiting job (lowest
-- ordering_position) becomes 'available' when no active job of the key
-- (available, claimed, executing, retryable) is ahead of it: the job just
-- ahead ran, or gave up its place. One statement for every key of the
-- batch, never one per job.
--
-- EXACTLY ONCE, NONE LOST. Every caller of one key takes the key's advisory
-- transaction lock before it decides, and decides with a snapshot taken
-- after it holds the lock: two transactions whose outcomes touch one key
-- (job 1 completed in one, job 2 cancelled in the other, at the same
-- instant) decide one after the other, and the second sees the first's
-- outcome and its release. So the next job is released by exactly one of
-- them, and neither leaves it waiting because of the other's uncommitted
-- outcome. The locks are taken in the order of their keys' hashes, in one
-- loop, so two batches sharing keys cannot deadlock on them. While it holds
-- them, this function waits for no row: the waiting job is locked with SKIP
-- LOCKED, since a transaction holding its row is changing it (a cancel) and
-- comes here for its key next, after this one commits. (A transaction that
-- calls it several times, such as the expirer's loop or a user's transaction
-- that cancels jobs one by one, takes its keys' locks call by call; two of
-- those sharing keys in opposite orders are a deadlock PostgreSQL breaks by
-- failing one, whose work is then run again.) The one
-- interleaving no lock here can order is an enqueue that read the key
-- before the job ahead finished and commits its job 'pending' after the
-- release looked: the leader's sweep (maintenance, OrderingSweeper) releases
-- such a head.
--
-- Released jobs keep their runAt, run at once when it has passed (a late
-- release puts scheduled_at at now(), where a claim cursor reads it), and
-- wake the workers of their queues as an insert does. Returns how many jobs
-- were released or settled.
CREATE OR REPLACE FUNCTION stampeded_release_waiting(
    p_outcome      text,
    p_queues       text[],
    p_ids          uuid[],
    p_workflow_ids uuid[],
    p_keys         text[]
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_settled  integer := 0;
    v_finished uuid[];
    k_queues   text[];
    k_keys     text[];
    k_locks    bigint[];
    v_lock     bigint;
    r_queues   text[];
    v_released integer;
BEGIN
    IF p_outcome IS NOT NULL AND p_workflow_ids IS NOT NULL THEN
        SELECT array_agg(u.id) INTO v_finished
          FROM unnest(p_ids, p_workflow_ids) AS u(id, workflow_id)
         WHERE u.workflow_id IS NOT NULL;
        IF v_finished IS NOT NULL THEN
            v_settled := stampeded_workflow_advance(v_finished, p_outcome);
        END IF;
    END IF;

    IF p_keys IS NULL THEN
        RETURN v_settled;
    END IF;

    SELECT array_agg(k.queue ORDER BY k.lock, k.queue, k.key),
           array_agg(k.key   ORDER BY k.lock, k.queue, k.key),
           array_agg(DISTINCT k.lock)
      INTO k_queues, k_keys, k_locks
      FROM (SELECT DISTINCT u.queue, u.key,
                   hashtextextended('stampeded.ordering.' || current_schema() || chr(31) || u.queue || chr(31) || u.key, 0) AS lock
              FROM unnest(p_queues, p_keys) AS u(queue, key)
             WHERE u.key IS NOT NULL) k;
    IF k_keys IS NULL THEN
        RETURN v_settled;
    END IF;

    -- array_agg(DISTINCT) sorts: every caller takes them in one order.
    FOREACH v_lock IN ARRAY k_locks LOOP
        PERFORM pg_advisory_xact_lock(v_lock);
    END LOOP;

    -- A new statement, so a new snapshot: it sees every outcome committed by
    -- a transaction that held one of these locks before.
    WITH head AS (
        SELECT w.queue, w.id
          FROM unnest(k_queues, k_keys) AS k(queue, key)
         CROSS JOIN LATERAL (
               SELECT p.queue, p.id, p.ordering_position
                 FROM stampeded_jobs p
                WHERE p.queue = k.queue
                  AND p.ordering_key = k.key
                  AND p.state = 'pending'
                  AND p.deps_pending IS NULL
                ORDER BY p.ordering_position
                LIMIT 1) w
         -- Nothing active ahead of it: read backwards from it, as the claim does.
         WHERE (SELECT e.ordering_position FROM stampeded_jobs e
                 WHERE e.queue = k.queue
                   AND e.ordering_key = k.key
                   AND e.ordering_position < w.ordering_position
                   AND e.state IN ('available','claimed','executing','retryable')
                 ORDER BY e.ordering_position DESC LIMIT 1) IS NULL
    ),
    locked AS (
        SELECT j.queue, j.id
          FROM stampeded_jobs j
         WHERE j.queue = ANY (ARRAY(SELECT h.queue FROM head h))
           AND j.id    = ANY (ARRAY(SELECT h.id FROM head h))
           AND (j.queue, j.id) IN (SELECT h.queue, h.id FROM head h)
           AND j.state = 'pending'
           AND j.deps_pending IS NULL
         ORDER BY j.queue, j.id
           FOR UPDATE SKIP LOCKED
    ),
    released AS (
        UPDATE stampeded_jobs j
           SET state        = 'available',
               scheduled_at = greatest(j.scheduled_at, now())
         -- Through the primary key, one probe a job: a join to the CTE can
         -- be planned as a hash join over the whole partition (the callers
         -- run with enable_nestloop off).
         WHERE j.queue = ANY (ARRAY(SELECT l.queue FROM locked l))
           AND j.id    = ANY (ARRAY(SELECT l.id FROM locked l))
           AND j.state = 'pending'
        RETURNING j.queue
    )
    SELECT array_agg(DISTINCT r.queue), count(*)
      INTO r_queues, v_released
      FROM released r;

    IF r_queues IS NOT NULL THEN
        PERFORM pg_notify(current_schema() || '.stampeded_insert', q) FROM unnest(r_queues) AS q;
    END IF;

    RETURN v_settled + v_released;
END;
$$;
