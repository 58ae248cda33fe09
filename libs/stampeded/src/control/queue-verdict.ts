/** The planner's three verdicts, as stampeded_queue_policies spells them. */
export type Verdict = 'steady' | 'rush' | 'hold';

/** What the planner knows about one queue when it decides. */
export interface QueueFacts {
  queue: string;
  maxRunning: number | null;
  maxWaitSecs: number | null;
  /** Claimed plus executing across the fleet. */
  running: number;
  /** How long the next job in claim order has been due; null when none is. */
  headWaitSecs: number | null;
  /** An operator's pause is in force. */
  paused: boolean;
  /** Who paused the queue, and why (null when not said). */
  pausedBy: string | null;
  pauseReason: string | null;
}

export interface Decision {
  verdict: Verdict;
  /** Which rule decided, and on what numbers. */
  reason: string;
}

/**
 * A queue's verdict, the first rule that applies deciding. Order is
 * priority: an operator's pause beats everything (workers obey the pause
 * itself; the verdict says so to whoever reads verdicts); a queue at its cap is held
 * even when its head waits too long (rushing it would only push it further
 * over); then a long wait rushes it; otherwise it is steady.
 */
export function decideVerdict(f: QueueFacts): Decision {
  const wait = f.headWaitSecs === null ? 'no job due' : `head waited ${f.headWaitSecs.toFixed(1)}s`;
  if (f.paused) return { verdict: 'hold', reason: `paused by ${f.pausedBy ?? 'an operator'}${f.pauseReason ? `: ${f.pauseReason}` : ''}` };
  if (f.maxRunning !== null && f.running >= f.maxRunning) {
    return { verdict: 'hold', reason: `max_running: ${f.running} claimed or executing, cap ${f.maxRunning}` };
  }
  if (f.maxWaitSecs !== null && f.headWaitSecs !== null && f.headWaitSecs > f.maxWaitSecs) {
    return { verdict: 'rush', reason: `max_wait_secs: ${wait}, more than ${f.maxWaitSecs}s` };
  }
  const of = f.maxRunning !== null ? ` of ${f.maxRunning}` : '';
  return { verdict: 'steady', reason: `steady: ${f.running} running${of}, ${wait}` + (f.maxWaitSecs !== null ? ` of ${f.maxWaitSecs}s` : '') };
}
