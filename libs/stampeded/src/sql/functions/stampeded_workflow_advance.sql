-- Workflow jobs that finished (p_ids, all with the outcome
-- p_outcome: 'completed', 'discarded' or 'cancelled') release the jobs that
-- wait for them: each dependent 'pending' job counts them off its
-- deps_pending and becomes 'available' at zero. A failed dependency
-- (discarded or cancelled) cancels its dependent instead, unless their edge
-- has ignore_failure, with the reason in the dependent's last_error and
-- errors; those cancellations release their own dependents in turn, one
-- round per level of the graph.
--
-- Called by every function that ends a workflow job, in the outcome's
-- statement and transaction, only for the jobs whose workflow_id is set: a
-- job outside any workflow never gets here. Whatever the batch, a round is
-- three statements: read the dependents of the whole batch from the edges'
-- primary key, lock them in (queue, id) order, update them. Never one per
-- edge.
--
-- EXACTLY ONCE. Each decrement is made under the dependent's row lock and
-- computed from the row's latest version (READ COMMITTED re-reads a row that
-- changed under the lock), so two transactions finishing a job's last two
-- dependencies at the same moment, in two processes, count both, and only
-- the second sees zero and releases it; a job that is no longer 'pending'
-- (released, cancelled, or cancelled by hand) is left alone. The locks are
-- taken in (queue, id) order: two batches sharing dependents cannot
-- deadlock on them.
--
-- Released jobs wake the workers of their queues as an insert does.
CREATE OR REPLACE FUNCTION stampeded_workflow_advance(
    p_ids     uuid[],
    p_outcome text
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_ids     uuid[] := p_ids;
    v_outcome text   := p_outcome;
    v_failed  boolean;
    d_queues  text[];
    d_ids     uuid[];
    d_met     integer[];
    d_blocker text[];
    c_ids     uuid[];
    r_queues  text[];
    v_changed integer := 0;
BEGIN
    LOOP
        v_failed := v_outcome <> 'completed';

        SELECT array_agg(h.job_queue ORDER BY h.job_queue, h.job_id),
               array_agg(h.job_id    ORDER BY h.job_queue, h.job_id),
               array_agg(h.met       ORDER BY h.job_queue, h.job_id),
               array_agg(h.blocker   ORDER BY h.job_queue, h.job_id)
          INTO d_queues, d_ids, d_met, d_blocker
          FROM (SELECT e.job_queue, e.job_id, count(*)::integer AS met,
                       -- The first dependency the job does not tolerate failing, named by its workflow name.
                       min(CASE WHEN v_failed AND NOT e.ignore_failure THEN e.depends_on_id::text END) AS blocker
                  FROM stampeded_workflow_edges e
                 WHERE e.depends_on_id = ANY (v_ids)
                 GROUP BY e.job_queue, e.job_id) h;
        EXIT WHEN d_ids IS NULL;

        PERFORM 1 FROM stampeded_jobs d
         WHERE d.queue = ANY (d_queues) AND d.id = ANY (d_ids) AND d.state = 'pending'
         ORDER BY d.queue, d.id
           FOR UPDATE;

        WITH moved AS (
            UPDATE stampeded_jobs d
               SET deps_pending = greatest(d.deps_pending - h.met, 0),
                   state        = CASE WHEN h.blocker IS NOT NULL THEN 'cancelled'
                                       WHEN d.deps_pending - h.met <= 0 THEN 'available'
                                       ELSE 'pending' END,
                   failure_kind = CASE WHEN h.blocker IS NOT NULL THEN 'cancelled' ELSE d.failure_kind END,
                   last_error   = CASE WHEN h.blocker IS NOT NULL THEN left(b.reason, 4000) ELSE d.last_error END,
                   errors       = CASE WHEN h.blocker IS NOT NULL
                                       THEN d.errors || jsonb_build_object(
                                                'at', now(), 'attempt', d.attempt, 'kind', 'cancelled',
                                                'message', left(b.reason, 1000),
                                                'destination', d.destination, 'exit_status', NULL)
                                       ELSE d.errors END,
                   finished_at  = CASE WHEN h.blocker IS NOT NULL THEN now() ELSE NULL END,
                   dedup_scope  = CASE WHEN h.blocker IS NOT NULL THEN NULL ELSE d.dedup_scope END,
                   -- A job released late runs as soon as it is due, not before its runAt.
                   scheduled_at = CASE WHEN h.blocker IS NULL AND d.deps_pending - h.met <= 0
                                       THEN greatest(d.scheduled_at, now()) ELSE d.scheduled_at END
              FROM unnest(d_queues, d_ids, d_met, d_blocker) AS h(queue, id, met, blocker)
              LEFT JOIN LATERAL (
                  SELECT format('dependency %s (%s) was %s', coalesce(w.name, h.blocker), h.blocker, v_outcome) AS reason
                    FROM stampeded_workflow_jobs w
                   WHERE h.blocker IS NOT NULL AND w.job_id = h.blocker::uuid
                   LIMIT 1) b ON true
             WHERE d.queue = ANY (d_queues)
               AND d.id    = ANY (d_ids)
               AND d.queue = h.queue
               AND d.id    = h.id
               AND d.state = 'pending'
            RETURNING d.queue, d.id, d.state
        )
        SELECT array_agg(m.id) FILTER (WHERE m.state = 'cancelled'),
               array_agg(DISTINCT m.queue) FILTER (WHERE m.state = 'available'),
               v_changed + count(*)
          INTO c_ids, r_queues, v_changed
          FROM moved m;

        IF r_queues IS NOT NULL THEN
            PERFORM pg_notify(current_schema() || '.stampeded_insert', q) FROM unnest(r_queues) AS q;
        END IF;

        EXIT WHEN c_ids IS NULL;
        v_ids     := c_ids;
        v_outcome := 'cancelled';
    END LOOP;

    RETURN v_changed;
END;
$$;
