-- Migration 13: workflows and batches -- jobs that wait for other jobs.
--
-- A workflow is a set of jobs enqueued together (QueueService.enqueueWorkflow,
-- one transaction), each naming the jobs of the set it waits for: a DAG,
-- checked before anything is written. A batch is a workflow whose callback
-- job waits for every other job, whatever their outcome.
--
-- THE STATE 'pending'. A job that waits for others is inserted 'pending':
-- outside the claim index (its predicate is state IN ('available',
-- 'retryable')) and invisible to every claim, this runtime's and the seed's
-- stampeded_claim alike, and counted under its own state by the counters'
-- trigger, which counts whatever state a row holds. It becomes 'available'
-- when its last dependency finishes, or 'cancelled' when a dependency it
-- does not tolerate fails.
--
-- TWO COLUMNS on stampeded_jobs, at the end of the row, NULL on every job
-- outside a workflow:
--   workflow_id   the workflow the job belongs to. The outcome functions
--                 (stampeded_complete_many, stampeded_fail, stampeded_cancel,
--                 stampeded_reap) read it to decide whether a finished job
--                 has anything to release; a plain job's NULL costs them no
--                 lookup. No index: a workflow's jobs are listed by
--                 stampeded_workflow_jobs.
--   deps_pending  how many of its dependencies have not finished yet, for a
--                 job still 'pending'. Decremented under the row's lock by
--                 stampeded_workflow_advance, so two dependencies finishing
--                 at once in two processes release the job exactly once.
-- A row that leaves them NULL stores no more than before: its null bitmap
-- still fits in the header's padding (bench/RESULTS.md, "Workflows", has the
-- sql-cost numbers before and after).
--
-- TWO TABLES beside it, written once by the enqueue and read by the release,
-- the dashboard, the CLI and a running job's ctx.dependencies():
--   stampeded_workflow_jobs    one row per job: its name in the workflow.
--   stampeded_workflow_edges   one row per dependency: `job` waits for
--                              `depends_on`, and runs anyway when it fails
--                              if ignore_failure. Its primary key leads with
--                              depends_on: the release reads the dependents
--                              of a batch of finished jobs in one scan.
-- Both go with their workflow (ON DELETE CASCADE).

ALTER TABLE stampeded_jobs
    ADD COLUMN workflow_id  uuid,
    ADD COLUMN deps_pending integer;

ALTER TABLE stampeded_jobs DROP CONSTRAINT stampeded_jobs_state_valid;
-- NOT VALID: every row there is holds one of the states before, all still
-- allowed; validating would read the whole table under the ALTER's lock.
ALTER TABLE stampeded_jobs ADD CONSTRAINT stampeded_jobs_state_valid CHECK (
    state IN ('pending','available','claimed','executing','retryable','completed','discarded','cancelled')
) NOT VALID;

CREATE TABLE stampeded_workflows (
    id          uuid        PRIMARY KEY,
    name        text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    kind        text        NOT NULL DEFAULT 'workflow' CHECK (kind IN ('workflow', 'batch')),
    -- How many jobs it was enqueued with.
    jobs        integer     NOT NULL CHECK (jobs >= 1),
    inserted_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX stampeded_workflows_inserted_idx ON stampeded_workflows (inserted_at);

CREATE TABLE stampeded_workflow_jobs (
    workflow_id uuid NOT NULL REFERENCES stampeded_workflows (id) ON DELETE CASCADE,
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    job_queue   text NOT NULL,
    job_id      uuid NOT NULL,
    PRIMARY KEY (workflow_id, name)
);

CREATE INDEX stampeded_workflow_jobs_job_idx ON stampeded_workflow_jobs (job_id);

CREATE TABLE stampeded_workflow_edges (
    workflow_id      uuid    NOT NULL REFERENCES stampeded_workflows (id) ON DELETE CASCADE,
    depends_on_queue text    NOT NULL,
    depends_on_id    uuid    NOT NULL,
    job_queue        text    NOT NULL,
    job_id           uuid    NOT NULL,
    ignore_failure   boolean NOT NULL DEFAULT false,
    PRIMARY KEY (depends_on_id, job_id)
);

-- A job's own dependencies (ctx.dependencies(), the dashboard's tree).
CREATE INDEX stampeded_workflow_edges_job_idx ON stampeded_workflow_edges (job_id);
CREATE INDEX stampeded_workflow_edges_workflow_idx ON stampeded_workflow_edges (workflow_id);
