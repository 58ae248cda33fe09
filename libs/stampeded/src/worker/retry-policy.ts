/**
 * The retry decision for a job whose run failed: whether it runs again, and
 * after how long. Every failure of a handler this worker ran is decided here,
 * in this order:
 *
 * 1. The handler's own say. An UnrecoverableError gives up. A RetryAfterError
 *    retries after the delay it carries, and so does a BreakerOpenError that
 *    reaches here (no breaker to open: the job has no destination, or the
 *    worker no queue control).
 * 2. Heartbeat loss: this worker's stall, not the job's failure. It retries
 *    at once; the schema's interruption budget bounds how often.
 * 3. Anything else (`raised`, `timed_out`, `worker_exited`): the task's
 *    RetryPolicy, by default DEFAULT_RETRY_POLICY.
 *
 * TypeScript decides, SQL applies. This file decides the delay and whether to
 * give up before the attempts run out; it writes nothing. stampeded_fail
 * (sql/functions/stampeded_fail.sql) is the only place that changes the
 * job's state: it applies the decision inside the (claimed_by, attempt)
 * fence and keeps the final word on the budgets the schema holds. A job
 * whose attempt has reached max_attempts, or whose interruptions pass
 * max_interruptions, is discarded whatever the delay; a give-up is recorded
 * as `unrecoverable`, which it discards at once. When the worker is killed
 * no TypeScript runs: the expirer and the reaper end the job in SQL alone,
 * with the same budgets and no delay.
 *
 * Not decided here: a queue-control deferral (breaker open, tenant over its
 * share) is the runtime declining to run the job, not a failure of its
 * handler. The gate chooses that delay and the attempt is refunded.
 */
import { Logger } from '@nestjs/common';
import { BreakerOpenError, RetryAfterError, UnrecoverableError } from '../errors/stampeded.errors.js';
import type { FailedAttempt, RetryableFailureKind, RetryDecision, RetryPolicy } from '../interfaces/retry-policy.interface.js';
import { INVALID_RETRY_DECISION, RETRY_POLICY_THREW } from '../stampeded.messages.js';
import type { FailureRecord } from './outcome-recorder.js';
import { describeError } from './describe-error.js';

const logger = new Logger('Stampeded');

/**
 * The delay before a failed job's next attempt: exponential from the job's
 * backoff_base_ms (doubling per attempt), capped at backoff_max_ms, with equal
 * jitter -- half the delay fixed, half random -- so that a batch of jobs that
 * failed together (a downstream outage) does not come back together.
 */
export function backoffDelayMs(attempt: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const exponent = Math.max(0, attempt - 1);
  // 2 ** 1024 is Infinity; Math.min caps it all the same.
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.min(exponent, 64));
  const half = ceiling / 2;
  return Math.round(half + random() * half);
}

/** Exponential backoff with equal jitter from the job's backoff options, until its attempts are spent. */
export const DEFAULT_RETRY_POLICY: RetryPolicy = Object.freeze({
  nextRetry: ({ job }: FailedAttempt): RetryDecision => ({
    retry: true,
    delayMs: backoffDelayMs(job.attempt, job.backoffBaseMs, job.backoffMaxMs),
  }),
});

/** A handler's failure on its way to be recorded: heartbeat loss is one too, decided before any policy is asked. */
export interface HandlerFailure {
  job: FailedAttempt['job'];
  error: unknown;
  kind: RetryableFailureKind | 'heartbeat_lost';
}

const RETRY_NOW: RetryDecision = Object.freeze({ retry: true, delayMs: 0 });
const GIVE_UP: RetryDecision = Object.freeze({ retry: false });

/** Whether and when the failed job runs again (see the order above). */
export function decideRetry(failure: HandlerFailure, policy: RetryPolicy = DEFAULT_RETRY_POLICY): RetryDecision {
  const { error, kind } = failure;
  if (error instanceof UnrecoverableError) return GIVE_UP;
  if (error instanceof RetryAfterError) return { retry: true, delayMs: Math.max(0, error.delayMs) };
  if (error instanceof BreakerOpenError) return { retry: true, delayMs: Math.max(0, error.cooldownMs) };
  if (kind === 'heartbeat_lost') return RETRY_NOW;
  return askPolicy({ job: failure.job, error, kind }, policy);
}

/**
 * The task's policy, held to its contract at run time: a policy that throws
 * or answers something that is not a decision must not lose the job, so the
 * default decides instead and the log says why.
 */
function askPolicy(failure: FailedAttempt, policy: RetryPolicy): RetryDecision {
  let decision: unknown;
  try {
    decision = policy.nextRetry(failure);
  } catch (err) {
    logger.error(RETRY_POLICY_THREW(failure.job.task, failure.job.id, describeError(err)));
    return DEFAULT_RETRY_POLICY.nextRetry(failure);
  }
  if (isDecision(decision)) return decision.retry ? { retry: true, delayMs: Math.round(decision.delayMs) } : GIVE_UP;
  logger.error(INVALID_RETRY_DECISION(failure.job.task, failure.job.id, decision));
  return DEFAULT_RETRY_POLICY.nextRetry(failure);
}

function isDecision(value: unknown): value is RetryDecision {
  if (value === null || typeof value !== 'object') return false;
  const { retry, delayMs } = value as { retry?: unknown; delayMs?: unknown };
  if (retry === false) return true;
  return retry === true && typeof delayMs === 'number' && Number.isFinite(delayMs) && delayMs >= 0;
}

/** The decision as stampeded_fail takes it: a retry keeps the failure's kind and carries its delay; a give-up is `unrecoverable`. */
export function failureRecord(failure: HandlerFailure, decision: RetryDecision, error = describeError(failure.error)): FailureRecord {
  const exitStatus = (failure.error as { exitStatus?: number } | null)?.exitStatus;
  const record: FailureRecord = decision.retry
    ? { kind: failure.kind, error, retryDelayMs: decision.delayMs }
    : { kind: 'unrecoverable', error, retryDelayMs: null };
  if (failure.kind === 'worker_exited') record.exitStatus = exitStatus;
  return record;
}
