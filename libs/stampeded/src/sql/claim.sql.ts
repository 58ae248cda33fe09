import { sql } from './statement.js';

// The claim: the statements a worker takes jobs with, one per way of claiming
// (worker/claimers.ts chooses among them), and the one that finds the jobs of
// a claim whose answer was lost. The functions they call are in
// functions/stampeded_claim_batch.sql, _fair.sql and _limited.sql; what the
// three do alike is written once, in functions/blocks/.

/**
 * What a worker reads of a job it claimed (see toClaimedJob): not the columns
 * whose value the claim itself decides (state, claimed_by, claimed_at =
 * heartbeat_at, finished_at), that a job not yet completed has none of
 * (result), or that no worker reads (dedup_key, progress). Times come as
 * epoch milliseconds, and attempted_by as NULL when this claim is the only
 * entry: parsing timestamps and text arrays is a large part of what a no-op
 * job allocates in the worker (NOTES.md, "What the claim returns").
 */
export const CLAIMED_COLUMNS = `id, queue, tenant_id, task, args, meta, priority, destination,
          extract(epoch FROM scheduled_at)::float8 * 1000 AS scheduled_at, expire_seconds,
          extract(epoch FROM heartbeat_at)::float8 * 1000 AS heartbeat_at, attempt, max_attempts,
          CASE WHEN cardinality(attempted_by) = 1 THEN NULL ELSE attempted_by END AS attempted_by,
          interruptions, max_interruptions, deferrals, max_deferrals, checkpoint,
          extract(epoch FROM checkpoint_at)::float8 * 1000 AS checkpoint_at, checkpoint_seq, backoff_base_ms, backoff_max_ms,
          backoff_base_wide_ms, dedup_scope, dedup_period, failure_kind, last_error, errors, dead_letter_queue, source_id, source_queue,
          source_attempts, extract(epoch FROM inserted_at)::float8 * 1000 AS inserted_at, ordering_key`;

/**
 * The plain claim, functions/stampeded_claim_batch.sql; $5, when given, the
 * cursor in epoch milliseconds below which it reads nothing (see
 * ClaimCursor).
 */
export const CLAIM_BATCH = sql(
  'stampeded_claim_batch',
  `SELECT ${CLAIMED_COLUMNS} FROM stampeded_claim_batch($1, $2, $3, $4,
     CASE WHEN $5::float8 IS NULL THEN '-infinity'::timestamptz ELSE to_timestamp($5::float8 / 1000) END)`,
);

/** The claim while tenants compete, functions/stampeded_claim_fair.sql: $5 the tenants, $6 the most jobs of each. */
export const CLAIM_FAIR = sql('stampeded_claim_fair', `SELECT ${CLAIMED_COLUMNS} FROM stampeded_claim_fair($1, $2, $3, $4, $5::text[], $6)`);

/**
 * The claim of a queue with max_running or rate limits (stampeded_claim_limited):
 * $5 the rate-limit rules as JSON (null: none), $6 and $7 the fair claim's
 * tenants and share (null: the plain claim). A row with no job carries
 * held_ms: a full window frees a start after that long. counted_after_ms:
 * how long after the statement began the claim counted its windows (its
 * claimed_at), on the database's clock and rounded down, so that the worker
 * can place that moment on its own clock (StartGrace).
 */
export const CLAIM_LIMITED = sql(
  'stampeded_claim_limited',
  `SELECT ${CLAIMED_COLUMNS}, held_ms,
          floor(extract(epoch FROM c.claimed_at - statement_timestamp()) * 1000)::float8 AS counted_after_ms
     FROM (SELECT (l.job).*, l.held_ms FROM stampeded_claim_limited($1, $2, $3, $4, $5::jsonb, $6::text[], $7) l) c`,
);

/** Jobs this worker owns in the database: LostClaims gives back those it does not hold. */
export const UNKNOWN_CLAIMS = sql(
  'stampeded_unknown_claims',
  `SELECT id::text AS id, queue, attempt FROM stampeded_jobs
    WHERE claimed_by = $1 AND state IN ('claimed', 'executing')`,
);
