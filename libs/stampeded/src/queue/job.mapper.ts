import type { Job, JobLogs } from '../interfaces/job.interface.js';
import { fromStoredDedupScope } from './job-input.validator.js';

/** A stampeded_jobs row as node-postgres returns it. */
export type JobRowResult = Record<string, any>;

export function toJob(row: JobRowResult): Job {
  return {
    id: row.id,
    queue: row.queue,
    tenantId: row.tenant_id,
    task: row.task,
    args: row.args,
    meta: row.meta,
    state: row.state,
    priority: row.priority,
    destination: row.destination,
    orderingKey: row.ordering_key ?? null,
    scheduledAt: row.scheduled_at,
    expireSeconds: row.expire_seconds,
    heartbeatAt: row.heartbeat_at,
    attempt: row.attempt,
    maxAttempts: row.max_attempts,
    attemptedBy: row.attempted_by,
    interruptions: row.interruptions,
    maxInterruptions: row.max_interruptions,
    deferrals: row.deferrals,
    maxDeferrals: row.max_deferrals,
    checkpoint: row.checkpoint,
    checkpointAt: row.checkpoint_at,
    checkpointSeq: row.checkpoint_seq,
    // A base longer than the smallint holds is in backoff_base_wide_ms (backoffBaseColumns).
    backoffBaseMs: row.backoff_base_wide_ms ?? row.backoff_base_ms,
    backoffMaxMs: row.backoff_max_ms,
    claimedBy: row.claimed_by,
    claimedAt: row.claimed_at,
    dedupScope: fromStoredDedupScope(row.dedup_scope),
    dedupPeriod: row.dedup_period,
    failureKind: row.failure_kind,
    lastError: row.last_error,
    errors: row.errors,
    deadLetterQueue: row.dead_letter_queue,
    sourceId: row.source_id,
    sourceQueue: row.source_queue,
    sourceAttempts: row.source_attempts,
    insertedAt: row.inserted_at,
    finishedAt: row.finished_at,
    result: row.result ?? null,
    progress: row.progress ?? null,
  };
}

/**
 * A job as the worker's claim returns it: the columns a claim cannot have
 * changed or set to something else are filled in here rather than sent over
 * the wire, because printing a batch of full rows costs the database more
 * than updating them (NOTES.md, "What the claim returns").
 */
export function toClaimedJob(row: JobRowResult, workerId: string): Job {
  const claimedAt = new Date(row.heartbeat_at);
  return {
    ...toJob(row),
    state: 'executing',
    scheduledAt: new Date(row.scheduled_at),
    heartbeatAt: claimedAt,
    attemptedBy: row.attempted_by ?? [workerId],
    checkpointAt: row.checkpoint_at === null ? null : new Date(row.checkpoint_at),
    claimedBy: workerId,
    // Set to the same instant as heartbeat_at by the claim.
    claimedAt,
    insertedAt: new Date(row.inserted_at),
    // A claimed job has not finished.
    finishedAt: null,
    // The claim reads neither: a claimed job has no result yet, and its
    // progress is what this run reports.
    result: null,
    progress: null,
  };
}

/** A row of JOB_LOG_LINES. */
export interface JobLogRow {
  seq: number;
  attempt: number;
  at: Date;
  message: string;
}

/**
 * A job's log from its rows (JOB_LOG_LINES), oldest first. Every line the
 * job wrote took a number, those dropped included, so the last number less
 * the lines kept is how many were dropped (migration 16).
 */
export function toJobLogs(rows: readonly JobLogRow[]): JobLogs {
  const last = rows.length ? rows[rows.length - 1].seq : 0;
  return { lines: rows.map(({ at, attempt, message }) => ({ at, attempt, message })), dropped: last - rows.length };
}
