-- Deletes finished jobs past their retention (completed after p_older_than,
-- discarded and cancelled after p_failed_older_than), at most p_limit a
-- call, oldest first along the finished_at index, FOR UPDATE SKIP LOCKED:
-- the seed's function, and its contract, with one exception for workflows.
-- The log lines of the jobs it deletes go in the same statement.
--
-- A WORKFLOW JOB IS KEPT WHILE A JOB THAT WAITS FOR IT HAS NOT FINISHED.
-- What a dependency returned is read from its row (ctx.childResults(),
-- ctx.dependencies(), ctx.batch()) when the job that waits for it runs,
-- which can be long after the dependency finished: a fan-in behind ten
-- thousand jobs, a batch whose last job retries for hours. Pruned at its own
-- retention, the dependency's result would be gone by then. A job outside any
-- workflow (workflow_id NULL) is not looked at further; a workflow job's
-- dependents are read from the edges' primary key, which leads with the job
-- waited for. The workflow's own rows go once none of its jobs is left
-- (PRUNE_WORKFLOWS in workflows.sql.ts).
--
-- COUNTED, not `RETURNING 1`: a SQL function declared RETURNS integer yields
-- the first column of the first row, so `DELETE ... RETURNING 1` would
-- return 1 however many rows it deleted, and the caller loops until a count
-- comes back short of p_limit.
CREATE OR REPLACE FUNCTION stampeded_prune(
    p_older_than interval DEFAULT interval '1 hour',
    p_limit      integer  DEFAULT 10000,
    p_failed_older_than interval DEFAULT interval '7 days'
) RETURNS integer
LANGUAGE sql AS $$
    WITH doomed AS MATERIALIZED (
        SELECT f.queue, f.id FROM stampeded_jobs f
         WHERE f.finished_at IS NOT NULL
           -- Where the walk along the finished_at index stops: no job
           -- finished after the nearer of the two cutoffs is due. The CASE
           -- below is no index condition, and without this bound every call
           -- that found fewer than p_limit jobs read every retained row to
           -- the newest (bench/RESULTS.md, "Maintenance scans").
           AND f.finished_at < now() - least(p_older_than, p_failed_older_than)
           AND CASE f.state
                 WHEN 'completed' THEN f.finished_at < now() - p_older_than
                 WHEN 'discarded' THEN f.finished_at < now() - p_failed_older_than
                 WHEN 'cancelled' THEN f.finished_at < now() - p_failed_older_than
                 ELSE false
               END
           AND (f.workflow_id IS NULL
                OR NOT EXISTS (SELECT 1
                                 FROM stampeded_workflow_edges e
                                 JOIN stampeded_jobs w ON w.queue = e.job_queue AND w.id = e.job_id
                                WHERE e.depends_on_id = f.id
                                  AND w.state NOT IN ('completed', 'discarded', 'cancelled')
                                -- Probed per workflow job through the keys: without
                                -- the OFFSET the planner may hash every unfinished
                                -- dependent's edge once a call instead.
                               OFFSET 0))
         ORDER BY f.finished_at
         LIMIT p_limit
         FOR UPDATE OF f SKIP LOCKED
    ),
    deleted AS (
        DELETE FROM stampeded_jobs j
         USING doomed d
         WHERE j.queue = d.queue AND j.id = d.id
        RETURNING j.id
    ),
    -- A job's log lines go with it (migration 16), found through their
    -- primary key: a descent per job, which finds nothing for most.
    logs AS (
        DELETE FROM stampeded_job_logs l
         WHERE l.job_id = ANY (ARRAY(SELECT d.id FROM deleted d))
    )
    SELECT count(*)::int FROM deleted;
$$;
