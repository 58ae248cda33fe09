import type { FailureKind, Job } from './job.interface.js';

/** The failures a task's retry policy decides: its handler threw, ran past its deadline, or its isolated process died. */
export type RetryableFailureKind = Extract<FailureKind, 'raised' | 'timed_out' | 'worker_exited'>;

/** One failed run of a job, as its retry policy sees it. */
export interface FailedAttempt {
  /** The job as it was claimed: `attempt` (1 on the first run), `maxAttempts`, `backoffBaseMs`, `backoffMaxMs`, ... */
  readonly job: Job;
  /** What the handler threw; for `timed_out`, the error its signal fired with. */
  readonly error: unknown;
  readonly kind: RetryableFailureKind;
}

/**
 * Run the job again after `delayMs`, or give up now. Giving up discards the
 * job at once (failure kind `unrecoverable`) and dead-letters it when it has
 * a dead-letter queue. A retry is still bounded by `maxAttempts`: the job is
 * discarded when its attempts are spent, whatever the delay.
 */
export type RetryDecision = { readonly retry: true; readonly delayMs: number } | { readonly retry: false };

/**
 * When a task's failed job runs again: the task's `retryPolicy` option, or
 * DEFAULT_RETRY_POLICY. Synchronous and without side effects the job depends
 * on: it runs in the worker, between the handler's failure and the write that
 * records it.
 */
export interface RetryPolicy {
  nextRetry(failure: FailedAttempt): RetryDecision;
}
