import { Logger } from '@nestjs/common';
import { BreakerOpenError, RetryAfterError, UnrecoverableError } from '../errors/stampeded.errors.js';
import type { Job } from '../interfaces/job.interface.js';
import type { RetryPolicy } from '../interfaces/retry-policy.interface.js';
import { backoffDelayMs, decideRetry, DEFAULT_RETRY_POLICY, failureRecord, type HandlerFailure } from './retry-policy.js';

const job = (attempt: number, backoffBaseMs = 1000, backoffMaxMs = 3_600_000) =>
  ({ id: 'job-1', task: 'send', attempt, maxAttempts: 5, backoffBaseMs, backoffMaxMs }) as Job;

const raised = (attempt: number, error: unknown = new Error('boom')): HandlerFailure => ({ job: job(attempt), error, kind: 'raised' });

describe('backoffDelayMs', () => {
  it('doubles from the base per attempt', () => {
    const top = () => 1; // the random half at its largest: the full ceiling
    expect([1, 2, 3, 4].map((a) => backoffDelayMs(a, 1000, 3_600_000, top))).toEqual([1000, 2000, 4000, 8000]);
  });

  it('is capped at the maximum, however many attempts', () => {
    expect(backoffDelayMs(30, 1000, 60_000, () => 1)).toBe(60_000);
    expect(backoffDelayMs(32767, 1000, 60_000, () => 1)).toBe(60_000);
  });

  it('jitters within the upper half of the ceiling', () => {
    expect(backoffDelayMs(3, 1000, 3_600_000, () => 0)).toBe(2000);
    for (let i = 0; i < 200; i++) {
      const d = backoffDelayMs(3, 1000, 3_600_000);
      expect(d).toBeGreaterThanOrEqual(2000);
      expect(d).toBeLessThanOrEqual(4000);
    }
  });

  it('treats attempt 0 as the first', () => {
    expect(backoffDelayMs(0, 500, 10_000, () => 1)).toBe(500);
  });
});

describe('DEFAULT_RETRY_POLICY', () => {
  it("retries after the job's exponential backoff", () => {
    for (let i = 0; i < 50; i++) {
      const decision = DEFAULT_RETRY_POLICY.nextRetry({ job: job(3, 500, 60_000), error: new Error('boom'), kind: 'raised' });
      expect(decision.retry).toBe(true);
      const delayMs = (decision as { delayMs: number }).delayMs;
      expect(delayMs).toBeGreaterThanOrEqual(1000);
      expect(delayMs).toBeLessThanOrEqual(2000);
    }
  });

  it('cannot be changed by an app', () => {
    expect(Object.isFrozen(DEFAULT_RETRY_POLICY)).toBe(true);
  });
});

describe('decideRetry', () => {
  const never: RetryPolicy = {
    nextRetry: () => {
      throw new Error('the policy is not asked here');
    },
  };

  it('gives up on an UnrecoverableError, whatever the policy', () => {
    expect(decideRetry(raised(1, new UnrecoverableError('bad input')), never)).toEqual({ retry: false });
  });

  it('retries after the delay a RetryAfterError asks for', () => {
    expect(decideRetry(raised(1, new RetryAfterError(7000)), never)).toEqual({ retry: true, delayMs: 7000 });
    expect(decideRetry(raised(1, new RetryAfterError(-5)), never)).toEqual({ retry: true, delayMs: 0 });
  });

  it('retries after the cooldown of a BreakerOpenError that no breaker took', () => {
    expect(decideRetry(raised(1, new BreakerOpenError(30_000)), never)).toEqual({ retry: true, delayMs: 30_000 });
  });

  it('retries a job whose worker lost its heartbeat at once', () => {
    expect(decideRetry({ job: job(2), error: new Error('heartbeat lost'), kind: 'heartbeat_lost' }, never)).toEqual({ retry: true, delayMs: 0 });
  });

  it("asks the task's policy about a raise, a timeout and an isolated process's death", () => {
    const seen: string[] = [];
    const policy: RetryPolicy = {
      nextRetry: ({ job: j, kind }) => {
        seen.push(kind);
        return { retry: true, delayMs: j.attempt * 100 };
      },
    };
    expect(decideRetry(raised(2), policy)).toEqual({ retry: true, delayMs: 200 });
    expect(decideRetry({ job: job(3), error: new Error('late'), kind: 'timed_out' }, policy)).toEqual({ retry: true, delayMs: 300 });
    expect(decideRetry({ job: job(1), error: new Error('exit 137'), kind: 'worker_exited' }, policy)).toEqual({ retry: true, delayMs: 100 });
    expect(seen).toEqual(['raised', 'timed_out', 'worker_exited']);
  });

  it('passes on a give-up and rounds a delay', () => {
    expect(decideRetry(raised(1), { nextRetry: () => ({ retry: false }) })).toEqual({ retry: false });
    expect(decideRetry(raised(1), { nextRetry: () => ({ retry: true, delayMs: 12.6 }) })).toEqual({ retry: true, delayMs: 13 });
  });

  it('falls back to the default, and says why, when the policy throws or answers no decision', () => {
    const errors: string[] = [];
    const logError = Logger.prototype.error;
    Logger.prototype.error = (message: unknown) => void errors.push(String(message));
    try {
      const answers: unknown[] = [undefined, 5000, { retry: true }, { retry: true, delayMs: -1 }, { retry: true, delayMs: NaN }, { retry: 'yes' }];
      for (const answer of answers) {
        const decision = decideRetry(raised(1), { nextRetry: () => answer as never });
        expect(decision).toMatchObject({ retry: true });
        expect((decision as { delayMs: number }).delayMs).toBeGreaterThanOrEqual(500);
      }
      expect(
        decideRetry(raised(1), {
          nextRetry: () => {
            throw new Error('policy bug');
          },
        }),
      ).toMatchObject({ retry: true });
      expect(errors).toHaveLength(answers.length + 1);
      expect(errors[1]).toMatch(/task "send" answered 5000 for job job-1; the default backoff decides instead/);
      expect(errors.at(-1)).toMatch(/task "send" threw while deciding job job-1.*policy bug/s);
    } finally {
      Logger.prototype.error = logError;
    }
  });
});

describe('failureRecord', () => {
  it("keeps the failure's kind and delay on a retry", () => {
    expect(failureRecord(raised(1), { retry: true, delayMs: 250 }, 'boom')).toEqual({ kind: 'raised', error: 'boom', retryDelayMs: 250 });
  });

  it('records a give-up as unrecoverable, which stampeded_fail discards at once', () => {
    expect(failureRecord({ job: job(1), error: new Error('late'), kind: 'timed_out' }, { retry: false }, 'late')).toEqual({
      kind: 'unrecoverable',
      error: 'late',
      retryDelayMs: null,
    });
  });

  it("keeps an isolated process's exit status", () => {
    const died = Object.assign(new Error('exit 137'), { workerExited: true, exitStatus: 137 });
    expect(failureRecord({ job: job(1), error: died, kind: 'worker_exited' }, { retry: true, delayMs: 5 }, 'exit 137')).toEqual({
      kind: 'worker_exited',
      error: 'exit 137',
      retryDelayMs: 5,
      exitStatus: 137,
    });
  });

  it("writes the error's stack when no description is given", () => {
    expect(failureRecord(raised(1, new Error('boom')), { retry: false }).error).toMatch(/^Error: boom\n\s+at /);
  });
});
