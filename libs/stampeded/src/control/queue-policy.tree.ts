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

export type Condition = 'paused' | 'atMaxRunning' | 'waitedTooLong';

/**
 * A behaviour tree as data: a selector tries its children in order until one
 * succeeds, a sequence runs its children until one fails, a check succeeds
 * when its condition holds, a decide always succeeds with its verdict. The
 * branch that decided names itself in the reason.
 */
export type BehaviourNode = { selector: BehaviourNode[] } | { sequence: BehaviourNode[] } | { check: Condition } | { decide: Verdict; branch: string };

/**
 * One tree for every queue. Order is priority: an operator's pause beats
 * everything; a queue at its cap is held even when its head waits too long
 * (rushing it would only push it further over); then a long wait rushes it.
 */
export const QUEUE_POLICY_TREE: BehaviourNode = {
  selector: [
    { sequence: [{ check: 'paused' }, { decide: 'hold', branch: 'paused' }] },
    { sequence: [{ check: 'atMaxRunning' }, { decide: 'hold', branch: 'max_running' }] },
    { sequence: [{ check: 'waitedTooLong' }, { decide: 'rush', branch: 'max_wait_secs' }] },
    { decide: 'steady', branch: 'steady' },
  ],
};

const CONDITIONS: Record<Condition, (f: QueueFacts) => boolean> = {
  paused: (f) => f.paused,
  atMaxRunning: (f) => f.maxRunning !== null && f.running >= f.maxRunning,
  waitedTooLong: (f) => f.maxWaitSecs !== null && f.headWaitSecs !== null && f.headWaitSecs > f.maxWaitSecs,
};

export interface Decision {
  verdict: Verdict;
  /** Which branch decided, and on what numbers. */
  reason: string;
}

/** The reason a paused queue's verdict gives: written by a pause, and by the planner while the queue stays paused. */
export function pauseExplained(by: string | null, why: string | null | undefined): string {
  return `paused by ${by ?? 'an operator'}${why ? `: ${why}` : ''}`;
}

function explain(branch: string, f: QueueFacts): string {
  const wait = f.headWaitSecs === null ? 'no job due' : `head waited ${f.headWaitSecs.toFixed(1)}s`;
  switch (branch) {
    case 'paused':
      return pauseExplained(f.pausedBy, f.pauseReason);
    case 'max_running':
      return `max_running: ${f.running} claimed or executing, cap ${f.maxRunning}`;
    case 'max_wait_secs':
      return `max_wait_secs: ${wait}, more than ${f.maxWaitSecs}s`;
    default:
      return (
        `steady: ${f.running} running${f.maxRunning !== null ? ` of ${f.maxRunning}` : ''}, ${wait}` + (f.maxWaitSecs !== null ? ` of ${f.maxWaitSecs}s` : '')
      );
  }
}

function tick(node: BehaviourNode, facts: QueueFacts): Decision | 'success' | 'failure' {
  if ('check' in node) return CONDITIONS[node.check](facts) ? 'success' : 'failure';
  if ('decide' in node) return { verdict: node.decide, reason: explain(node.branch, facts) };
  if ('sequence' in node) {
    let last: Decision | 'success' | 'failure' = 'success';
    for (const child of node.sequence) {
      last = tick(child, facts);
      if (last === 'failure') return 'failure';
    }
    return last;
  }
  for (const child of node.selector) {
    const result = tick(child, facts);
    if (result !== 'failure') return result;
  }
  return 'failure';
}

/** Evaluates the tree for one queue. A tree that decides nothing leaves the queue steady. */
export function decideVerdict(facts: QueueFacts, tree: BehaviourNode = QUEUE_POLICY_TREE): Decision {
  const result = tick(tree, facts);
  return typeof result === 'object' ? result : { verdict: 'steady', reason: explain('steady', facts) };
}
