import { sql } from '@stampeded/nestjs/internal';

/**
 * A discarded job's dead-letter copy while it waits in its dead-letter
 * queue (available, retryable or discarded there, as a redrive finds it):
 * by its source_id, among the copies made in the minute after the job's
 * end. The copy's id is a UUIDv7 drawn in the transaction that discarded
 * the job (on the clock, after its now()), so $3 and $4, UUIDv7 bounds
 * from finished_at, make this a short range of stampeded_jobs_dead_letter_idx
 * (migration 4), which holds only waiting copies and has their source_id:
 * an index-only read however many copies the queue has handled. A copy
 * handled since (completed, or redriven) is not looked for.
 */
export const DEAD_LETTER_COPY = sql(
  'dashboard_dead_letter_copy',
  `SELECT id::text AS id, queue, state FROM stampeded_jobs
    WHERE queue = $1 AND id BETWEEN $3::uuid AND $4::uuid AND source_id = $2::uuid
      AND source_queue IS NOT NULL AND state IN ('available', 'retryable', 'discarded')
    ORDER BY id LIMIT 1`,
);

/**
 * A workflow job's place: the workflow, its name in it
 * (stampeded_workflow_jobs_job_idx), the jobs it waits for
 * (stampeded_workflow_edges_job_idx) and the jobs that wait for it (the
 * edges' primary key, which leads with depends_on_id), each by name, with
 * its state (the jobs' primary key; 'removed' once pruned).
 */
export const WORKFLOW_PLACE = sql(
  'dashboard_workflow_place',
  `SELECT w.id::text AS workflow_id, w.name AS workflow, w.kind, m.name,
          coalesce((SELECT json_agg(json_build_object('name', dm.name, 'id', e.depends_on_id::text, 'queue', e.depends_on_queue,
                                                      'state', coalesce(d.state, 'removed')) ORDER BY dm.name)
                      FROM stampeded_workflow_edges e
                      JOIN stampeded_workflow_jobs dm ON dm.workflow_id = e.workflow_id AND dm.job_id = e.depends_on_id
                      LEFT JOIN stampeded_jobs d ON d.queue = e.depends_on_queue AND d.id = e.depends_on_id
                     WHERE e.job_id = m.job_id), '[]'::json) AS waits_for,
          coalesce((SELECT json_agg(json_build_object('name', dm.name, 'id', e.job_id::text, 'queue', e.job_queue,
                                                      'state', coalesce(d.state, 'removed')) ORDER BY dm.name)
                      FROM stampeded_workflow_edges e
                      JOIN stampeded_workflow_jobs dm ON dm.workflow_id = e.workflow_id AND dm.job_id = e.job_id
                      LEFT JOIN stampeded_jobs d ON d.queue = e.job_queue AND d.id = e.job_id
                     WHERE e.depends_on_id = m.job_id), '[]'::json) AS waited_for_by
     FROM stampeded_workflow_jobs m
     JOIN stampeded_workflows w ON w.id = m.workflow_id
    WHERE m.job_id = $1::uuid`,
);

/** Jobs of its queue a search for a key's neighbours reads at most, each way. */
export const NEIGHBOUR_SCAN = 10_000;

/**
 * The jobs of an ordering key enqueued just before and just after a job, in
 * its queue: a walk of the queue's primary key each way from the job, of at
 * most $4 jobs (NEIGHBOUR_SCAN), keeping the first of the key. No index
 * holds a key's finished jobs (the key's indexes hold only its unfinished
 * ones, so that a finished job costs them nothing), so a neighbour further
 * away than that is not found, and the page says so.
 */
export const ORDERING_NEIGHBOURS = sql(
  'dashboard_ordering_neighbours',
  `SELECT 'before' AS side, b.* FROM (
       SELECT id::text AS id, queue, state, task FROM (
           SELECT id, queue, state, task, ordering_key FROM stampeded_jobs
            WHERE queue = $1 AND id < $3::uuid ORDER BY id DESC LIMIT $4) s
        WHERE ordering_key = $2 ORDER BY id DESC LIMIT 1) b
   UNION ALL
   SELECT 'after', a.* FROM (
       SELECT id::text AS id, queue, state, task FROM (
           SELECT id, queue, state, task, ordering_key FROM stampeded_jobs
            WHERE queue = $1 AND id > $3::uuid ORDER BY id LIMIT $4) s
        WHERE ordering_key = $2 ORDER BY id LIMIT 1) a`,
);

/**
 * Unfinished jobs of the same dedup scope in its queue, in the periods just
 * before and after the job's own ($3: its inserted_at, $4: its period):
 * their dedup keys are the schema's own formula (dedup_key in the seed) for
 * those periods, read from stampeded_jobs_dedup_idx. A finished job has
 * released its scope (dedup_scope is cleared on every terminal outcome), and
 * a scope without a period has one job at a time: neither has a twin to find.
 */
export const DEDUP_TWINS = sql(
  'dashboard_dedup_twins',
  `SELECT id::text AS id, queue, state, inserted_at FROM stampeded_jobs
    WHERE queue = $1
      AND dedup_key IN (
          SELECT sha256(($2::text || ':' || extract(epoch FROM (date_trunc($4::text, $3::timestamptz + k * ('1 ' || $4::text)::interval, 'UTC')
                                                               - to_timestamp(0)))::bigint::text)::bytea)
            FROM (VALUES (-1), (1)) AS v(k))
    ORDER BY id`,
);
