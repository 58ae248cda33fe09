-- The reaper ends a job the way stampeded_fail ends it, so that a job that
-- killed its worker twice reaches its dead_letter_queue as one that raised
-- does. Every terminal path ends the same way: the
-- provenance copy (source_id, source_queue, source_attempts, max_attempts; its
-- own dead_letter_queue NULL, so that a dead letter cannot loop), and an entry
-- in the errors ring buffer (stampeded_push_error), so that "why did this run twice" is answered in
-- the job's own history and not only in last_error.
--
-- Also reaped: a job claimed by a worker whose row is gone altogether. The
-- reaper finds orphans through their worker's stale heartbeat, so a job whose
-- worker row was deleted (by an operator, or by a worker that kept running
-- after its row was reaped) has no stale heartbeat to be found by and would
-- stay 'executing' forever. Such a job is reaped once its own last sign of
-- life is as old as a dead worker's.
--
-- A discarded workflow or keyed job releases the jobs waiting for it
-- (stampeded_release_waiting), one call for all of them, and every discarded
-- job its debounce follow-up (stampeded_release_follow_ups). A job given back
-- for another attempt keeps its place in its key's order and its follow-up.
CREATE OR REPLACE FUNCTION stampeded_reap(
    p_dead_after interval DEFAULT interval '5 minutes'
) RETURNS TABLE (id uuid, queue text, worker_id uuid)
LANGUAGE sql AS $$
    WITH dead AS MATERIALIZED (
        SELECT w.id FROM stampeded_workers w
         WHERE w.last_heartbeat < now() - p_dead_after
        UNION
        SELECT DISTINCT o.claimed_by FROM stampeded_jobs o
         WHERE o.state IN ('claimed','executing')
           AND o.claimed_by IS NOT NULL
           AND coalesce(o.heartbeat_at, o.claimed_at) < now() - p_dead_after
           AND NOT EXISTS (SELECT 1 FROM stampeded_workers w WHERE w.id = o.claimed_by)
    ),
    reaped AS (
        UPDATE stampeded_jobs j
           -- The schema's two budgets: `attempt` was spent at claim (the
           -- poison brake), `interruptions` is the brake for jobs that kill
           -- their worker. A job at its last attempt is discarded here
           -- rather than parked: the claim never takes a job whose attempt
           -- has reached max_attempts, so 'retryable' would be forever.
           SET state        = CASE WHEN j.interruptions + 1 > j.max_interruptions
                                     OR j.attempt >= j.max_attempts
                                   THEN 'discarded' ELSE 'retryable' END,
               failure_kind  = 'worker_missing',
               interruptions = j.interruptions + 1,
               last_error    = 'worker stopped heartbeating; job reclaimed',
               error_fingerprint = stampeded_fingerprint('worker stopped heartbeating; job reclaimed'),
               errors = stampeded_push_error(j.errors, j.attempt, 'worker_missing', 'worker stopped heartbeating; job reclaimed',
                                             j.destination, NULL, j.claimed_at, j.claimed_by),
               claimed_by   = NULL,
               claimed_at   = NULL,
               heartbeat_at = NULL,
               finished_at  = CASE WHEN j.interruptions + 1 > j.max_interruptions
                                     OR j.attempt >= j.max_attempts THEN now() END,
               dedup_scope  = CASE WHEN j.interruptions + 1 > j.max_interruptions
                                     OR j.attempt >= j.max_attempts
                                   THEN NULL ELSE j.dedup_scope END
          FROM dead d
         WHERE j.claimed_by = d.id
           AND j.state IN ('claimed','executing')
        RETURNING j.id, j.queue, d.id AS worker_id, j.state, j.task, j.args, j.meta, j.tenant_id,
                  j.priority, j.destination, j.dead_letter_queue, j.attempt, j.max_attempts, j.workflow_id,
                  j.ordering_key
    ),
    -- Unreferenced, and still run: PostgreSQL executes every data-modifying
    -- CTE to completion whether or not the outer query reads it.
    lettered AS (
        INSERT INTO stampeded_jobs
            (queue, task, args, meta, tenant_id, priority, destination,
             source_id, source_queue, source_attempts, max_attempts)
        SELECT r.dead_letter_queue, r.task, r.args, r.meta, r.tenant_id, r.priority, r.destination,
               r.id, r.queue, r.attempt, r.max_attempts
          FROM reaped r
         WHERE r.state = 'discarded' AND r.dead_letter_queue IS NOT NULL
        RETURNING 1
    ),
    released AS (
        SELECT stampeded_release_waiting('discarded', array_agg(r.queue), array_agg(r.id),
                                         array_agg(r.workflow_id), array_agg(r.ordering_key)) AS n
          FROM reaped r
         WHERE r.state = 'discarded' AND (r.workflow_id IS NOT NULL OR r.ordering_key IS NOT NULL)
        HAVING count(*) > 0
    ),
    followed AS (
        SELECT stampeded_release_follow_ups(array_agg(r.queue), array_agg(r.id)) AS n
          FROM reaped r
         WHERE r.state = 'discarded'
        HAVING count(*) > 0
    )
    -- Evaluated once, before the first row: they run the releases.
    SELECT r.id, r.queue, r.worker_id FROM reaped r
     WHERE (SELECT count(*) FROM released) >= 0
       AND (SELECT count(*) FROM followed) >= 0;
$$;
