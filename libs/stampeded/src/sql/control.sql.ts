import { sql } from './statement.js';

// Queue control: queue policies and verdicts, circuit breakers, tenant shares.
// Durations travel as milliseconds, as in the maintenance statements.

/** A policy row as the service returns it: the policy, the planner's verdict, an operator's pause. */
const POLICY_COLUMNS = `queue, max_running, max_wait_secs, verdict, reason, decided_at, running,
          paused, paused_by, pause_reason, paused_at, policy_by, policy_at`;

/**
 * A declared or run-time policy, with who set it ($4, or null) and when; the
 * verdict and pause columns are left alone. QueueControlService.setPolicy(),
 * the dashboard's policy form and its API all write it with this statement,
 * after validateQueuePolicy().
 */
export const UPSERT_POLICY = sql(
  'control_upsert_policy',
  `INSERT INTO stampeded_queue_policies (queue, max_running, max_wait_secs, policy_by, policy_at)
   VALUES ($1, $2, $3, $4, now())
   ON CONFLICT (queue) DO UPDATE
      SET max_running = excluded.max_running, max_wait_secs = excluded.max_wait_secs,
          policy_by = excluded.policy_by, policy_at = now(), updated_at = now()
   RETURNING ${POLICY_COLUMNS}`,
);

/**
 * An operator's pause ($2 who, $3 why or null), for the whole fleet until
 * resumed: the service, the dashboard and the CLI all write it with this
 * statement, and it is stored here alone, in the pause's columns. Workers
 * obey `paused` at once and however old the verdict is (a dead planner must
 * not un-pause a queue). The verdict is the planner's: it holds a paused
 * queue from its next run (decideVerdict()). Pausing a paused queue records
 * the new who and why and keeps when it was paused.
 */
export const PAUSE_QUEUE = sql(
  'control_pause_queue',
  `INSERT INTO stampeded_queue_policies AS p (queue, paused, paused_by, pause_reason, paused_at)
   VALUES ($1, true, $2, $3, now())
   ON CONFLICT (queue) DO UPDATE
      SET paused = true, paused_by = excluded.paused_by, pause_reason = excluded.pause_reason,
          paused_at = CASE WHEN p.paused THEN p.paused_at ELSE now() END, updated_at = now()
   RETURNING ${POLICY_COLUMNS}`,
);

/**
 * Ends a pause. The verdict the planner decided while the queue was paused
 * is older than this write, and no worker obeys it (READ_VERDICTS).
 */
export const RESUME_QUEUE = sql(
  'control_resume_queue',
  `INSERT INTO stampeded_queue_policies (queue)
   VALUES ($1)
   ON CONFLICT (queue) DO UPDATE
      SET paused = false, paused_by = NULL, pause_reason = NULL, paused_at = NULL, updated_at = now()
   RETURNING ${POLICY_COLUMNS}`,
);

export const LIST_POLICIES = sql(
  'control_list_policies',
  `SELECT ${POLICY_COLUMNS}
     FROM stampeded_queue_policies
    ORDER BY queue`,
);

/**
 * What the planner decides on, per policy row: claimed plus executing (read
 * through the partial claimed index) and how long the head of the claim order
 * has been due (read through the claim index in its own order).
 */
export const PLANNER_INPUTS = sql(
  'control_planner_inputs',
  `SELECT p.queue, p.max_running, p.max_wait_secs, p.verdict, p.reason,
          p.paused, p.paused_by, p.pause_reason, p.updated_at::text AS updated_at,
          (SELECT count(*) FROM stampeded_jobs j
            WHERE j.queue = p.queue AND j.state IN ('claimed', 'executing'))::int AS running,
          (SELECT extract(epoch FROM now() - j.scheduled_at)::float8 FROM stampeded_jobs j
            WHERE j.queue = p.queue AND j.state IN ('available', 'retryable') AND j.scheduled_at <= now()
            ORDER BY j.priority, j.scheduled_at LIMIT 1) AS head_wait_secs
     FROM stampeded_queue_policies p
    ORDER BY p.queue`,
);

/**
 * The planner's verdicts, in one statement. A row an operator wrote (a
 * policy, a pause, a resume) between the planner's read and this write is
 * left as the operator wrote it: `updated_at` ($5, as read, in text so that
 * it compares to the microsecond) is re-checked under the row lock here, and
 * the next run decides on the new row.
 */
export const WRITE_VERDICTS = sql(
  'control_write_verdicts',
  `UPDATE stampeded_queue_policies p
      SET verdict = v.verdict, reason = v.reason, decided_at = now(), running = v.running
     FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::timestamptz[]) AS v(queue, verdict, reason, running, updated_at)
    WHERE p.queue = v.queue AND p.updated_at = v.updated_at`,
);

/**
 * A worker's view of the verdicts on its queues. Freshness is judged by the
 * database's clock, so a worker with a drifting clock reads the same verdicts
 * as its neighbours. A verdict decided before an operator last wrote its row
 * (a policy, a pause, a resume) is not fresh either: it was decided on what
 * the row said before, and the planner decides again at its next run.
 * max_running tells the worker which queues to claim through CLAIM_LIMITED,
 * which counts the running jobs itself.
 */
export const READ_VERDICTS = sql(
  'control_read_verdicts',
  `SELECT queue, verdict, max_running, decided_at, paused,
          (decided_at IS NOT NULL AND decided_at >= updated_at
           AND decided_at > now() - make_interval(secs => $2::float8 / 1000)) AS fresh
     FROM stampeded_queue_policies p
    WHERE queue = ANY ($1::text[])`,
);

/** Breakers that are not plainly closed: the only ones a worker needs to know of. */
export const READ_BREAKERS = sql(
  'control_read_breakers',
  `SELECT destination, state, failures,
          greatest(0, extract(epoch FROM coalesce(open_until, now()) - now()) * 1000)::float8 AS open_ms
     FROM stampeded_breakers
    WHERE state <> 'closed' OR failures > 0`,
);

export const LIST_BREAKERS = sql(
  'control_list_breakers',
  `SELECT destination, state, failures, window_started_at, opened_at, open_until, probe_by::text AS probe_by,
          probe_at, opened_by, reason, closed_by, closed_at, updated_at
     FROM stampeded_breakers
    ORDER BY destination`,
);

export const BREAKER_FAILURE = sql(
  'control_breaker_failure',
  `SELECT state, was_open, open_ms::float8 AS open_ms FROM stampeded_breaker_failure($1, $2, $3, $4, $5, $6)`,
);

export const BREAKER_SUCCESS = sql('control_breaker_success', `SELECT stampeded_breaker_success($1, $2) AS state`);

export const BREAKER_PROBE = sql('control_breaker_probe', `SELECT verdict, wait_ms::float8 AS wait_ms FROM stampeded_breaker_probe($1, $2, $3)`);

export const BREAKER_TRIP = sql('control_breaker_trip', `SELECT state, open_until FROM stampeded_breaker_trip($1, $2, $3, $4)`);

/** Closes a breaker ($2: who, kept in the row, or null); false when the destination has no breaker row. */
export const BREAKER_RESET = sql('control_breaker_reset', `SELECT stampeded_breaker_reset($1, $2) AS closed`);

/**
 * Per tenant on these queues: jobs running across the fleet, and whether any
 * is due and waiting. Running jobs are read through the partial claimed
 * index; waiting tenants by a loose index scan of the tenant index, one probe
 * per tenant rather than one row per job, so a 10,000-job flood costs one
 * probe like any other tenant.
 */
export const READ_TENANTS = sql(
  'control_read_tenants',
  `WITH RECURSIVE waiting(tenant_id) AS (
       (SELECT tenant_id FROM stampeded_jobs
         WHERE queue = ANY ($1::text[]) AND tenant_id IS NOT NULL
           AND state IN ('available', 'retryable') AND scheduled_at <= now()
         ORDER BY tenant_id LIMIT 1)
       UNION ALL
       SELECT (SELECT j.tenant_id FROM stampeded_jobs j
                WHERE j.queue = ANY ($1::text[]) AND j.tenant_id > w.tenant_id
                  AND j.state IN ('available', 'retryable') AND j.scheduled_at <= now()
                ORDER BY j.tenant_id LIMIT 1)
         FROM waiting w WHERE w.tenant_id IS NOT NULL
   ),
   running AS (
       SELECT tenant_id, count(*)::int AS n FROM stampeded_jobs
        WHERE queue = ANY ($1::text[]) AND tenant_id IS NOT NULL AND state IN ('claimed', 'executing')
        GROUP BY tenant_id
   )
   SELECT coalesce(w.tenant_id, r.tenant_id) AS tenant_id, coalesce(r.n, 0) AS running, w.tenant_id IS NOT NULL AS waiting
     FROM (SELECT tenant_id FROM waiting WHERE tenant_id IS NOT NULL) w
     FULL JOIN running r ON r.tenant_id = w.tenant_id`,
);
