import type { Breaker, QueuePolicyRow } from '../interfaces/control.interface.js';

/** A row of stampeded_queue_policies as QueueControlService, the dashboard and the CLI return it. */
export function toPolicy(r: Record<string, any>): QueuePolicyRow {
  return {
    queue: r.queue,
    maxRunning: r.max_running,
    maxWaitSecs: r.max_wait_secs,
    verdict: r.verdict,
    reason: r.reason,
    decidedAt: r.decided_at,
    running: r.running,
    paused: r.paused,
    pausedBy: r.paused_by,
    pauseReason: r.pause_reason,
    pausedAt: r.paused_at,
    policyBy: r.policy_by,
    policyAt: r.policy_at,
  };
}

/** A row of stampeded_breakers as QueueControlService, the dashboard and the CLI return it. */
export function toBreaker(r: Record<string, any>): Breaker {
  return {
    destination: r.destination,
    state: r.state,
    failures: r.failures,
    openedAt: r.opened_at,
    openUntil: r.open_until,
    openedBy: r.opened_by,
    reason: r.reason,
    probeBy: r.probe_by,
    closedBy: r.closed_by,
    closedAt: r.closed_at,
    updatedAt: r.updated_at,
  };
}
