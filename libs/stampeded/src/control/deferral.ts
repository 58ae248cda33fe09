import type { FailureRecord } from '../worker/outcome-recorder.js';

/**
 * A job that queue control declines to run now (its tenant is over its
 * share, its destination's breaker is open): recorded as a failure of this
 * kind, which refunds the attempt, and due again after `delayMs` plus a
 * little spread, so that a fleet's deferred jobs do not all come due in the
 * same millisecond.
 */
export function deferral(kind: 'throttled' | 'breaker_open', error: string, delayMs: number, random: () => number = Math.random): FailureRecord {
  return { kind, error, retryDelayMs: Math.round(delayMs * (1 + random() * 0.2)) };
}
