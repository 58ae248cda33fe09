import { sql } from '@stampeded/nestjs/internal';

/**
 * One job by id. With its queue the primary key answers directly; without it
 * PostgreSQL 18 skip-scans the primary key (queue, id) over its few distinct
 * queues rather than reading every row.
 */
export const GET_JOB = sql(
  'dashboard_get_job',
  `SELECT *, id::text AS id, claimed_by::text AS claimed_by, source_id::text AS source_id,
          encode(error_fingerprint, 'hex') AS error_fingerprint
     FROM stampeded_jobs
    WHERE id = $1::uuid AND ($2::text IS NULL OR queue = $2)`,
);

export const RETRY_JOB = sql('dashboard_retry_job', `SELECT was, now_state, queue FROM stampeded_retry($1::uuid, $2::text)`);

export const CANCEL_JOB = sql('dashboard_cancel_job', `SELECT was, now_state, queue FROM stampeded_cancel($1::uuid, $2::text)`);

/** An operator's discard of a waiting job (functions/stampeded_discard.sql); $3 is the error it records. */
export const DISCARD_JOB = sql('dashboard_discard_job', `SELECT was, now_state, queue FROM stampeded_discard($1::uuid, $2::text, $3::text)`);

/**
 * Errors grouped by fingerprint (the schema's normalised hash of the message),
 * over jobs that are failing now: retrying or discarded.
 *
 * Counted from stampeded_jobs_failing_idx (migration 4) alone: it holds only
 * failing jobs, with every column the groups are made of, so the groups come
 * from an index-only scan; then each of the page's groups takes its newest
 * job as its example, one descent of the same index each. Read through the
 * seed's fingerprint index, which has none of those columns, the page would
 * visit the heap once per failing job (NOTES.md, "The dashboard's queries").
 */
export const ERRORS_BY_FINGERPRINT = sql(
  'dashboard_errors_by_fingerprint',
  `WITH groups AS (
       SELECT error_fingerprint,
              count(*) AS jobs,
              count(*) FILTER (WHERE state = 'retryable') AS retrying,
              count(*) FILTER (WHERE state = 'discarded') AS discarded,
              array_agg(DISTINCT queue ORDER BY queue) AS queues,
              array_agg(DISTINCT task ORDER BY task) AS tasks,
              array_agg(DISTINCT failure_kind ORDER BY failure_kind) AS failure_kinds
         FROM stampeded_jobs
        WHERE error_fingerprint IS NOT NULL
          AND state IN ('retryable', 'discarded')
          AND ($1::text IS NULL OR queue = $1)
        GROUP BY error_fingerprint
        ORDER BY count(*) DESC
        LIMIT $2
   )
   SELECT encode(g.error_fingerprint, 'hex') AS fingerprint,
          g.jobs::bigint AS jobs, g.retrying::bigint AS retrying, g.discarded::bigint AS discarded,
          g.queues, g.tasks, g.failure_kinds,
          e.id::text AS example_id, e.queue AS example_queue, e.last_error AS example_error
     FROM groups g
     LEFT JOIN LATERAL (
          SELECT j.id, j.queue, j.last_error FROM stampeded_jobs j
           WHERE j.error_fingerprint = g.error_fingerprint
             AND j.state IN ('retryable', 'discarded')
             AND ($1::text IS NULL OR j.queue = $1)
           ORDER BY j.id DESC
           LIMIT 1) e ON true
    ORDER BY g.jobs DESC, g.error_fingerprint`,
);

/**
 * Jobs finished per minute over the last `$1` minutes, all queues and
 * outcomes together; a minute in which none finished has no row.
 *
 * Each minute is its own count over a range of the seed's finished_at
 * partial index, an index-only scan where the visibility map allows. One
 * GROUP BY over the hour reads the same index once, but puts every entry
 * through date_bin() and a hash table, at several times the cost of sixty
 * range counts (NOTES.md, "The dashboard's queries"). Split by queue and
 * outcome, the chart would read every row of the hour from the heap, or need
 * (finished_at, queue, state) in an index that every completion writes,
 * which the chart does not pay for.
 */
export const THROUGHPUT = sql(
  'dashboard_throughput',
  `SELECT extract(epoch FROM m.minute)::bigint AS bucket, c.n
     FROM generate_series(date_trunc('minute', now()) - make_interval(mins => $1::int - 1),
                          date_trunc('minute', now()), interval '1 minute') AS m(minute)
    CROSS JOIN LATERAL (
          SELECT count(*)::bigint AS n FROM stampeded_jobs
           WHERE finished_at IS NOT NULL
             AND finished_at >= m.minute AND finished_at < m.minute + interval '1 minute') c
    WHERE c.n > 0`,
);

/**
 * The jobs a bulk action applies to: those matching the list's filters, in
 * an eligible state, after a keyset cursor, in id order, one batch at a time.
 * Each filter is a fixed predicate that a NULL parameter switches off.
 */
const BULK_BATCH = `SELECT j.id, j.queue FROM stampeded_jobs j
    WHERE j.state = ANY($1::text[])
      AND ($2::text IS NULL OR j.queue = $2)
      AND ($3::text IS NULL OR j.task = $3)
      AND ($4::text IS NULL OR j.tenant_id = $4)
      AND ($5::text IS NULL OR j.destination = $5)
      AND ($6::uuid IS NULL OR j.id > $6)
    ORDER BY j.id
    LIMIT $7`;

/** How many jobs a bulk action would touch, counted up to a cap ($7). */
export const BULK_COUNT = sql('dashboard_bulk_count', `SELECT count(*)::int AS matched FROM (${BULK_BATCH}) b`);

/** One batch of a bulk retry, through the same function a single retry uses. */
export const BULK_RETRY = sql(
  'dashboard_bulk_retry',
  `SELECT b.id::text AS id, r.was, r.now_state FROM (${BULK_BATCH}) b CROSS JOIN LATERAL stampeded_retry(b.id, b.queue) r`,
);

/** One batch of a bulk cancel: fenced as a single cancel is. */
export const BULK_CANCEL = sql(
  'dashboard_bulk_cancel',
  `SELECT b.id::text AS id, r.was, r.now_state FROM (${BULK_BATCH}) b CROSS JOIN LATERAL stampeded_cancel(b.id, b.queue) r`,
);

/** One batch of a bulk discard, through the same function a single discard uses; $8 is the error it records. */
export const BULK_DISCARD = sql(
  'dashboard_bulk_discard',
  `SELECT b.id::text AS id, r.was, r.now_state FROM (${BULK_BATCH}) b CROSS JOIN LATERAL stampeded_discard(b.id, b.queue, $8::text) r`,
);
