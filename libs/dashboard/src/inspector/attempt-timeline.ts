import { FINISHED_STATES, type JobState } from '@stampeded/nestjs/internal';

/** How a stretch of a job's life ended, as the timeline names it. */
export type AttemptOutcome = 'running' | 'completed' | 'failed' | 'interrupted' | 'deferred' | 'cancelled' | 'discarded';

/** One run of the job's handler, or a claim that ended without one (a deferral). */
export interface AttemptSpan {
  attempt: number;
  worker: string | null;
  /** When it started: its claim. Null for an entry recorded before attempts kept their start. */
  startedAt: Date | null;
  /** When it ended; for a running attempt, the moment the timeline was made. */
  endedAt: Date;
  durationMs: number | null;
  outcome: AttemptOutcome;
  /** The failure kind the job recorded (raised, timed_out, worker_missing, ...). */
  kind: string | null;
  error: string | null;
}

export interface AttemptTimeline {
  enqueuedAt: Date;
  /** The end of the drawing: when the job finished, or now. */
  until: Date;
  spans: AttemptSpan[];
  /** When the job is due next, while it waits. */
  dueAt: Date | null;
  state: JobState;
  /** Attempts before the oldest kept: the errors ring keeps the last 10. */
  forgotten: boolean;
}

// The failure kinds by what they mean for the timeline: the worker or its
// process went away (an interruption), or the runtime declined to run the
// job and refunded the attempt (a deferral). Any other kind is a failure.
const INTERRUPTIONS = new Set(['heartbeat_lost', 'worker_exited', 'worker_missing']);
const DEFERRALS = new Set(['breaker_open', 'throttled']);

const date = (v: unknown): Date | null => (v === null || v === undefined || v === '' ? null : v instanceof Date ? v : new Date(String(v)));

/**
 * A job's attempts, from what its row keeps: each failed attempt's entry in
 * the errors ring (when it started and ended, its worker, its error), and
 * the last or current attempt from claimed_at, claimed_by and finished_at.
 * A completion keeps claimed_at, so a completed job's last attempt has its
 * start; an operator's cancel or discard ends the job without an attempt.
 */
export function attemptTimeline(job: Record<string, any>, now = new Date()): AttemptTimeline {
  const state = job.state as JobState;
  const errors = (job.errors ?? []) as Record<string, any>[];
  const spans: AttemptSpan[] = errors.map((e) => {
    const startedAt = date(e.started_at);
    const endedAt = date(e.at)!;
    const kind = e.kind ?? null;
    return {
      attempt: Number(e.attempt),
      worker: e.worker ?? null,
      startedAt,
      endedAt,
      durationMs: startedAt ? endedAt.getTime() - startedAt.getTime() : null,
      outcome: INTERRUPTIONS.has(kind) ? 'interrupted' : DEFERRALS.has(kind) ? 'deferred' : 'failed',
      kind,
      error: e.message ?? null,
    };
  });
  const claimedAt = date(job.claimed_at);
  const finishedAt = date(job.finished_at);
  const attemptedBy = (job.attempted_by ?? []) as string[];
  if (state === 'claimed' || state === 'executing') {
    spans.push({
      attempt: Number(job.attempt),
      worker: job.claimed_by ?? null,
      startedAt: claimedAt,
      endedAt: now,
      durationMs: claimedAt ? now.getTime() - claimedAt.getTime() : null,
      outcome: 'running',
      kind: null,
      error: null,
    });
  } else if (state === 'completed') {
    spans.push({
      attempt: Number(job.attempt),
      worker: attemptedBy[attemptedBy.length - 1] ?? null,
      startedAt: claimedAt,
      endedAt: finishedAt ?? now,
      durationMs: claimedAt && finishedAt ? finishedAt.getTime() - claimedAt.getTime() : null,
      outcome: 'completed',
      kind: null,
      error: null,
    });
  } else if ((state === 'cancelled' || state === 'discarded') && finishedAt) {
    // Ended by an operator (or, cancelled, by its workflow) rather than by an
    // attempt: the last error entry, when there is one, ended before this.
    const last = spans[spans.length - 1];
    if (!last || last.endedAt.getTime() < finishedAt.getTime() - 1000 || state === 'cancelled') {
      spans.push({
        attempt: Number(job.attempt),
        worker: null,
        startedAt: null,
        endedAt: finishedAt,
        durationMs: null,
        outcome: state,
        kind: job.failure_kind ?? null,
        error: state === 'discarded' ? (job.last_error ?? null) : null,
      });
    }
  }
  const enqueuedAt = date(job.inserted_at)!;
  return {
    enqueuedAt,
    until: FINISHED_STATES.has(state) && finishedAt ? finishedAt : now,
    spans,
    dueAt: state === 'available' || state === 'retryable' ? date(job.scheduled_at) : null,
    state,
    forgotten: errors.length >= 10 && Number(errors[0]?.attempt) > 1,
  };
}
