import type { Duration } from './maintenance.interface.js';

/** A queue's policy: in registerQueue({ policy }) or QueueControlService.setPolicy(). */
export interface QueuePolicy {
  /** Claimed plus executing across the fleet, held exactly by the claim (docs/queue-control.md). */
  maxRunning?: number | null;
  /** How long the next job in claim order may wait before the queue is rushed. */
  maxWaitSecs?: number | null;
}

export interface BreakerOptions {
  /** Failures within `window` that open the breaker. Default 5. */
  threshold?: number;
  /** Default '60s'. */
  window?: Duration;
  /** How long the breaker stays open before a probe may run. Default '30s'. */
  cooldown?: Duration;
  /** false: this destination's failures never open its breaker (an operator or a handler still can). Default true. */
  enabled?: boolean;
}

export interface FairnessOptions {
  /** A tenant's share is its weight over the weights of the tenants with work. Default 1 each. */
  weights?: Record<string, number>;
  /** Most jobs of one tenant running across the fleet: one number for every tenant, or per tenant. */
  maxRunning?: number | Record<string, number>;
  /** How long a job given back over its tenant's share waits before it is due again. Default 1000 ms. */
  retryDelay?: Duration;
}

/** At most `limit` jobs started in any `per` (a sliding window over claim times), across the fleet. */
export interface RateLimit {
  limit: number;
  /** The window, e.g. '1s', '1m', or milliseconds. */
  per: Duration;
}

/**
 * Rate limits by what a job is: its queue, its task, its tenant, its
 * destination. Under `tenants` and `destinations`, `'*'` gives every one not
 * named a window of its own. A job runs only while every limit it falls
 * under has room; until then it waits unclaimed, spending no attempt.
 */
export interface RateLimitOptions {
  queues?: Record<string, RateLimit>;
  tasks?: Record<string, RateLimit>;
  tenants?: Record<string, RateLimit>;
  destinations?: Record<string, RateLimit>;
}

export interface ControlOptions {
  /** How often the maintenance leader re-decides every queue's verdict. Default 2000 ms. */
  plannerInterval?: Duration;
  /** A verdict older than this counts as steady, so a dead planner degrades to round robin. Default '15s'. */
  freshness?: Duration;
  /** How often a worker re-reads verdicts, breakers and tenants. Default 1000 ms. */
  refreshInterval?: Duration;
  /** Per-destination circuit breakers: `default` for all, then per destination. */
  breakers?: { default?: BreakerOptions; destinations?: Record<string, BreakerOptions> };
  /** Per-tenant fair share of the running slots. Off unless set: `true` for equal shares. */
  fairness?: boolean | FairnessOptions;
  /** Jobs started per period, per queue, task, tenant or destination. None unless set. */
  rateLimits?: RateLimitOptions;
}

export type BreakerState = 'closed' | 'open' | 'half_open';

/** One row of stampeded_breakers. */
export interface Breaker {
  destination: string;
  state: BreakerState;
  failures: number;
  openedAt: Date | null;
  openUntil: Date | null;
  openedBy: string | null;
  reason: string | null;
  probeBy: string | null;
  /** Who last closed it by hand (closeBreaker({ by }), the dashboard's Reset), and when; null until someone does. */
  closedBy: string | null;
  closedAt: Date | null;
  updatedAt: Date;
}

/** One row of stampeded_queue_policies. */
export interface QueuePolicyRow {
  queue: string;
  maxRunning: number | null;
  maxWaitSecs: number | null;
  verdict: 'steady' | 'rush' | 'hold';
  reason: string | null;
  decidedAt: Date | null;
  /** Claimed plus executing when the planner decided. */
  running: number | null;
  /** An operator's pause is in force: no worker claims from the queue until it is resumed. */
  paused: boolean;
  /** Who paused it; null when not paused. */
  pausedBy: string | null;
  /** Why, as the operator wrote it; null when not said or not paused. */
  pauseReason: string | null;
  /** Since when; null when not paused. */
  pausedAt: Date | null;
  /** Who last set the policy (setPolicy({ by }), the dashboard's form, 'registerQueue()' for a declared one), and when; null for none. */
  policyBy: string | null;
  policyAt: Date | null;
}
