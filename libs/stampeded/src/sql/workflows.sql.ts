import { sql } from './statement.js';
import { jobInputRows, PLAIN_COLUMNS, PLAIN_VALUES } from './enqueue.sql.js';

/** The workflow's jobs as the plain enqueue reads them, each with its name in the workflow and how many jobs it waits for. */
const WORKFLOW_INPUT = jobInputRows([
  { column: 'step', type: 'text' },
  { column: 'deps_pending', type: 'integer' },
]);

/**
 * A whole workflow in one statement (migration 13, workflows): its row, its
 * jobs, their names and their edges. $1 and $2 are the jobs as the plain
 * enqueue reads them (each row with its id, its name in the workflow, `step`,
 * and how many jobs it waits for, `deps_pending`); $3 the workflow's id, $4
 * its name, $5 its kind; $6-$10 the edges as five arrays of one element an
 * edge: the dependency's queue and id, the waiting job's queue and id, and
 * ignore_failure. The edges carry the ids the caller drew, not positions to
 * be matched back to the rows: a join of 20,000 edges to a CTE of 10,000
 * rows is planned from the functions' default estimate of 100 rows each.
 * A job that waits for none is inserted 'available', and wakes the workers
 * as any insert does; the others 'pending'. The foreign keys of the names
 * and edges are checked at the end of the statement, by which time the
 * workflow's row is there.
 */
export const ENQUEUE_WORKFLOW = sql(
  'stampeded_enqueue_workflow',
  `
WITH input AS MATERIALIZED (
    SELECT * FROM ${WORKFLOW_INPUT}
),
workflow AS (
    INSERT INTO stampeded_workflows (id, name, kind, jobs)
    VALUES ($3::uuid, $4::text, $5::text, (SELECT count(*) FROM input))
),
members AS (
    INSERT INTO stampeded_workflow_jobs (workflow_id, name, job_queue, job_id)
    SELECT $3::uuid, i.step, i.queue, i.id FROM input i
),
edges AS (
    INSERT INTO stampeded_workflow_edges (workflow_id, depends_on_queue, depends_on_id, job_queue, job_id, ignore_failure)
    SELECT $3::uuid, e.depends_on_queue, e.depends_on_id, e.job_queue, e.job_id, e.ignore_failure
      FROM unnest($6::text[], $7::uuid[], $8::text[], $9::uuid[], $10::boolean[])
           AS e(depends_on_queue, depends_on_id, job_queue, job_id, ignore_failure)
)
INSERT INTO stampeded_jobs (${PLAIN_COLUMNS}, state, workflow_id, deps_pending)
SELECT ${PLAIN_VALUES},
       CASE WHEN r.deps_pending > 0 THEN 'pending' ELSE 'available' END, $3::uuid, nullif(r.deps_pending, 0)
  FROM input r
 ORDER BY r.ord`,
);

/** The states of a workflow's jobs, one row each, with what each waits for: getWorkflow(), the CLI, the dashboard. */
export const WORKFLOW_JOBS = sql(
  'stampeded_workflow_jobs',
  `
SELECT m.name, m.job_id::text AS id, m.job_queue AS queue, j.task, coalesce(j.state, 'removed') AS state, j.last_error,
       coalesce((SELECT json_agg(json_build_object('name', dm.name, 'ignoreFailure', e.ignore_failure) ORDER BY dm.name)
                   FROM stampeded_workflow_edges e
                   JOIN stampeded_workflow_jobs dm ON dm.workflow_id = e.workflow_id AND dm.job_id = e.depends_on_id
                  WHERE e.job_id = m.job_id), '[]'::json) AS depends_on
  FROM stampeded_workflow_jobs m
  LEFT JOIN stampeded_jobs j ON j.queue = m.job_queue AND j.id = m.job_id
 WHERE m.workflow_id = $1::uuid
 ORDER BY m.job_id`,
);

export const GET_WORKFLOW = sql('stampeded_get_workflow', `SELECT id::text AS id, name, kind, jobs, inserted_at FROM stampeded_workflows WHERE id = $1::uuid`);

/**
 * Workflows newest first, with their jobs counted by state ($1: how many,
 * $2: a cursor, the last id of the previous page, or NULL; $3: a name, or
 * NULL). Each workflow's jobs are read through its names' primary key.
 */
export const LIST_WORKFLOWS = sql(
  'stampeded_list_workflows',
  `
SELECT w.id::text AS id, w.name, w.kind, w.jobs, w.inserted_at, c.counts
  FROM stampeded_workflows w
  CROSS JOIN LATERAL (
       SELECT json_object_agg(s.state, s.n) AS counts
         FROM (SELECT coalesce(j.state, 'removed') AS state, count(*) AS n
                 FROM stampeded_workflow_jobs m
                 LEFT JOIN stampeded_jobs j ON j.queue = m.job_queue AND j.id = m.job_id
                WHERE m.workflow_id = w.id
                GROUP BY 1) s) c
 WHERE ($2::uuid IS NULL OR w.id < $2::uuid)
   AND ($3::text IS NULL OR w.name = $3::text)
 ORDER BY w.id DESC
 LIMIT $1`,
);

/**
 * Cancels every job of a workflow that has not finished, in one statement,
 * fenced as stampeded_cancel is: claimed_by cleared, so no worker records an
 * outcome for them, and the workers running them told through the cancel
 * channel. Their dependents are all in the same workflow and cancelled by
 * the same statement, so nothing is left to advance.
 */
export const CANCEL_WORKFLOW = sql(
  'stampeded_cancel_workflow',
  `
WITH target AS MATERIALIZED (
    SELECT j.queue, j.id, j.claimed_by
      FROM stampeded_workflow_jobs m
      JOIN stampeded_jobs j ON j.queue = m.job_queue AND j.id = m.job_id
     WHERE m.workflow_id = $1::uuid
       AND j.state NOT IN ('completed', 'discarded', 'cancelled')
     ORDER BY j.queue, j.id
       FOR UPDATE OF j
),
cancelled AS (
    UPDATE stampeded_jobs j
       SET state        = 'cancelled',
           failure_kind = 'cancelled',
           last_error   = left('workflow cancelled' || coalesce(': ' || $2::text, ''), 4000),
           finished_at  = now(),
           claimed_by   = NULL,
           claimed_at   = NULL,
           heartbeat_at = NULL,
           dedup_scope  = NULL
      FROM target t
     WHERE j.queue = t.queue AND j.id = t.id
       AND j.state NOT IN ('completed', 'discarded', 'cancelled')
    RETURNING j.id, t.claimed_by
)
SELECT (SELECT count(*) FROM cancelled)::int AS cancelled,
       (SELECT count(*) FROM (SELECT pg_notify(current_schema() || '.stampeded_cancel', c.id::text) FROM cancelled c
                               WHERE c.claimed_by IS NOT NULL) n)::int AS notified`,
);

/**
 * The jobs a job waits for, with their outcome and result, read by a
 * running job (ctx.dependencies()). A dependency removed on completion has
 * no row left: it completed, with no result to read.
 */
export const JOB_DEPENDENCIES = sql(
  'stampeded_job_dependencies',
  `
SELECT m.name, e.depends_on_id::text AS id, e.depends_on_queue AS queue,
       j.task, coalesce(j.state, 'removed') AS state, j.result, j.last_error
  FROM stampeded_workflow_edges e
  JOIN stampeded_workflow_jobs m ON m.workflow_id = e.workflow_id AND m.job_id = e.depends_on_id
  LEFT JOIN stampeded_jobs j ON j.queue = e.depends_on_queue AND j.id = e.depends_on_id
 WHERE e.job_id = $1::uuid
 ORDER BY m.name`,
);

/** The workflow a job belongs to, if any: tells a root job with no dependencies from a job outside any workflow. */
export const WORKFLOW_MEMBER = sql(
  'stampeded_workflow_member',
  `SELECT workflow_id::text AS workflow_id, name FROM stampeded_workflow_jobs WHERE job_id = $1::uuid LIMIT 1`,
);

/** How many workflows one PRUNE_WORKFLOWS statement looks at, at most. */
export const PRUNE_WORKFLOWS_SCAN = 1000;

/**
 * Deletes the workflows none of whose jobs is left in stampeded_jobs, and
 * their names and edges in the same statement (no foreign key ties them:
 * migration 15). A workflow's rows are what its jobs are shown and read by
 * (the dashboard's tree, the CLI, ctx.dependencies()), so they stay for as
 * long as any of its jobs does: the job pruner's retention (or
 * removeOnComplete) decides when that ends, and a workflow with a job still
 * to run is never empty.
 *
 * One pass looks at the workflows after the cursor $1 (an id, or NULL for
 * the first) in id order through the primary key: at most $2 of them, and
 * no more of them than hold $3 jobs between them past the first, which bounds
 * both the check (each member's job row, through its primary key, until one
 * is found) and the deletes. A workflow's jobs are inserted with it in one
 * statement and only ever leave, so one found empty stays empty. Row locks
 * only, taken SKIP LOCKED: an enqueue never waits on it. Answers how many
 * workflows went, the last id looked at (the next pass's cursor) and
 * whether any workflow lies beyond it.
 */
export const PRUNE_WORKFLOWS = sql(
  'stampeded_prune_workflows',
  `
WITH scanned AS MATERIALIZED (
    SELECT s.id
      FROM (SELECT w.id, sum(w.jobs) OVER (ORDER BY w.id ROWS UNBOUNDED PRECEDING) - w.jobs AS before
              FROM stampeded_workflows w
             WHERE w.id > coalesce($1::uuid, '00000000-0000-0000-0000-000000000000'::uuid)
             ORDER BY w.id
             LIMIT $2) s
     WHERE s.before < $3
),
doomed AS MATERIALIZED (
    SELECT w.id
      FROM stampeded_workflows w
     -- An array, so that it is an index condition whatever the table's size.
     WHERE w.id = ANY (ARRAY(SELECT id FROM scanned))
       AND NOT EXISTS (SELECT 1
                         FROM stampeded_workflow_jobs m
                         JOIN stampeded_jobs j ON j.queue = m.job_queue AND j.id = m.job_id
                        WHERE m.workflow_id = w.id)
     ORDER BY w.id
       FOR UPDATE SKIP LOCKED
),
deleted AS (
    DELETE FROM stampeded_workflows w
     USING doomed d
     WHERE w.id = d.id
    RETURNING 1
),
names AS (
    DELETE FROM stampeded_workflow_jobs m
     USING doomed d
     WHERE m.workflow_id = d.id
),
edges AS (
    DELETE FROM stampeded_workflow_edges e
     USING doomed d
     WHERE e.workflow_id = d.id
)
SELECT (SELECT count(*) FROM deleted)::int AS deleted,
       l.id::text AS last,
       EXISTS (SELECT 1 FROM stampeded_workflows w WHERE w.id > l.id) AS more
  FROM (SELECT (SELECT s.id FROM scanned s ORDER BY s.id DESC LIMIT 1) AS id) l`,
);
