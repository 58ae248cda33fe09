import { StampededConfigError } from '../errors/stampeded.errors.js';
import { INVALID_CONTROL_OPTION, UNKNOWN_OPTIONS } from '../stampeded.messages.js';
import { durationMs } from '../maintenance/maintenance.config.js';
import type { BreakerOptions, ControlOptions, QueuePolicy, RateLimit } from '../interfaces/control.interface.js';

export interface BreakerConfig {
  enabled: boolean;
  threshold: number;
  windowMs: number;
  cooldownMs: number;
}

export interface FairnessConfig {
  weights: Map<string, number>;
  /** Fleet-wide cap per tenant; `defaultMaxRunning` for tenants not named. */
  maxRunning: Map<string, number>;
  defaultMaxRunning: number;
  retryDelayMs: number;
}

/** The kinds of key a rate limit counts by, as stampeded_claim_limited's rules name them. */
export const RATE_LIMIT_KINDS = { queues: 'queue', tasks: 'task', tenants: 'tenant', destinations: 'destination' } as const;
export type RateLimitKind = (typeof RATE_LIMIT_KINDS)[keyof typeof RATE_LIMIT_KINDS];

/** Per kind, per value (or '*'): the limit and its window in ms. */
export type RateLimitConfig = Map<RateLimitKind, Map<string, { limit: number; ms: number }>>;

/** Every queue-control setting, resolved. */
export interface ControlConfig {
  plannerIntervalMs: number;
  freshnessMs: number;
  refreshIntervalMs: number;
  breakerDefault: BreakerConfig;
  breakers: Map<string, BreakerConfig>;
  fairness: FairnessConfig | null;
  rateLimits: RateLimitConfig;
}

/**
 * Defaults, and why. The planner runs every 2 s: often enough that a capped
 * queue is held within a couple of seconds of reaching its cap, rarely enough
 * that rewriting the policies table costs nothing. Freshness is seven planner
 * intervals plus a margin, so a leader hand-over (up to one leader check, 5 s)
 * never lets verdicts lapse, and a dead planner is noticed within 15 s.
 * Breakers follow the common 5 failures in a minute, 30 s cooldown.
 */
export const CONTROL_DEFAULTS = {
  plannerIntervalMs: 2000,
  freshnessMs: 15_000,
  refreshIntervalMs: 1000,
  breaker: { enabled: true, threshold: 5, windowMs: 60_000, cooldownMs: 30_000 } satisfies BreakerConfig,
  fairnessRetryDelayMs: 1000,
} as const;

const OPTION_NAMES = ['plannerInterval', 'freshness', 'refreshInterval', 'breakers', 'fairness', 'rateLimits'] as const;
const RATE_LIMIT_NAMES = ['limit', 'per'] as const;
const BREAKER_OPTION_NAMES = ['threshold', 'window', 'cooldown', 'enabled'] as const;
const FAIRNESS_OPTION_NAMES = ['weights', 'maxRunning', 'retryDelay'] as const;

const fail = (option: string, problem: string) => new StampededConfigError(INVALID_CONTROL_OPTION(option, problem));

function positive(option: string, value: unknown, whole = true): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || (whole && !Number.isSafeInteger(value))) {
    throw fail(option, `must be a ${whole ? 'whole ' : ''}number greater than 0, got ${JSON.stringify(value)}`);
  }
  return value;
}

function record(option: string, value: unknown): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw fail(option, `must be an object, got ${JSON.stringify(value)}`);
  }
  return value as Record<string, unknown>;
}

function resolveBreaker(option: string, o: BreakerOptions | undefined, base: BreakerConfig): BreakerConfig {
  if (o === undefined) return base;
  const unknown = Object.keys(record(option, o)).filter((k) => !(BREAKER_OPTION_NAMES as readonly string[]).includes(k));
  if (unknown.length) throw new StampededConfigError(UNKNOWN_OPTIONS(`StampededModule.forRoot(): control.${option}`, unknown, BREAKER_OPTION_NAMES));
  if (o.enabled !== undefined && typeof o.enabled !== 'boolean') throw fail(`${option}.enabled`, `must be true or false, got ${JSON.stringify(o.enabled)}`);
  return {
    enabled: o.enabled ?? base.enabled,
    threshold: o.threshold === undefined ? base.threshold : positive(`${option}.threshold`, o.threshold),
    windowMs: o.window === undefined ? base.windowMs : durationMs(`${option}.window`, o.window, INVALID_CONTROL_OPTION),
    cooldownMs: o.cooldown === undefined ? base.cooldownMs : durationMs(`${option}.cooldown`, o.cooldown, INVALID_CONTROL_OPTION),
  };
}

/** Resolves and checks the control options: a bad value fails at startup, naming the option. */
export function resolveControlConfig(options: ControlOptions | undefined): ControlConfig {
  const o = options ?? {};
  const unknown = Object.keys(record('(control)', o)).filter((k) => !(OPTION_NAMES as readonly string[]).includes(k));
  if (unknown.length) throw new StampededConfigError(UNKNOWN_OPTIONS('StampededModule.forRoot(): control', unknown, OPTION_NAMES));
  const ms = (option: 'plannerInterval' | 'freshness' | 'refreshInterval', fallback: number) =>
    o[option] === undefined ? fallback : durationMs(option, o[option], INVALID_CONTROL_OPTION);
  const config: ControlConfig = {
    plannerIntervalMs: ms('plannerInterval', CONTROL_DEFAULTS.plannerIntervalMs),
    freshnessMs: ms('freshness', CONTROL_DEFAULTS.freshnessMs),
    refreshIntervalMs: ms('refreshInterval', CONTROL_DEFAULTS.refreshIntervalMs),
    breakerDefault: CONTROL_DEFAULTS.breaker,
    breakers: new Map(),
    fairness: null,
    rateLimits: new Map(),
  };
  if (config.freshnessMs <= config.plannerIntervalMs) {
    throw fail(
      'freshness',
      `is ${config.freshnessMs} ms, not longer than plannerInterval (${config.plannerIntervalMs} ms): every verdict would be stale before the next one. ` +
        `Make it several planner intervals`,
    );
  }
  if (o.breakers !== undefined) {
    const b = record('breakers', o.breakers);
    const bad = Object.keys(b).filter((k) => k !== 'default' && k !== 'destinations');
    if (bad.length) throw new StampededConfigError(UNKNOWN_OPTIONS('StampededModule.forRoot(): control.breakers', bad, ['default', 'destinations']));
    config.breakerDefault = resolveBreaker('breakers.default', o.breakers.default, CONTROL_DEFAULTS.breaker);
    for (const [destination, options] of Object.entries(record('breakers.destinations', o.breakers.destinations ?? {}))) {
      config.breakers.set(destination, resolveBreaker(`breakers.destinations.${destination}`, options as BreakerOptions, config.breakerDefault));
    }
  }
  if (o.fairness !== undefined && o.fairness !== false) {
    if (o.fairness !== true && (typeof o.fairness !== 'object' || o.fairness === null || Array.isArray(o.fairness))) {
      throw fail('fairness', `must be true, false or { weights, maxRunning, retryDelay }, got ${JSON.stringify(o.fairness)}`);
    }
    const f = o.fairness === true ? {} : o.fairness;
    const bad = Object.keys(f).filter((k) => !(FAIRNESS_OPTION_NAMES as readonly string[]).includes(k));
    if (bad.length) throw new StampededConfigError(UNKNOWN_OPTIONS('StampededModule.forRoot(): control.fairness', bad, FAIRNESS_OPTION_NAMES));
    const weights = new Map<string, number>();
    for (const [tenant, w] of Object.entries(record('fairness.weights', f.weights ?? {})))
      weights.set(tenant, positive(`fairness.weights.${tenant}`, w, false));
    const maxRunning = new Map<string, number>();
    let defaultMaxRunning = Infinity;
    if (typeof f.maxRunning === 'number') defaultMaxRunning = positive('fairness.maxRunning', f.maxRunning);
    else if (f.maxRunning !== undefined) {
      for (const [tenant, n] of Object.entries(record('fairness.maxRunning', f.maxRunning)))
        maxRunning.set(tenant, positive(`fairness.maxRunning.${tenant}`, n));
    }
    config.fairness = {
      weights,
      maxRunning,
      defaultMaxRunning,
      retryDelayMs:
        f.retryDelay === undefined ? CONTROL_DEFAULTS.fairnessRetryDelayMs : durationMs('fairness.retryDelay', f.retryDelay, INVALID_CONTROL_OPTION),
    };
  }
  if (o.rateLimits !== undefined) config.rateLimits = resolveRateLimits(o.rateLimits);
  return config;
}

function resolveRateLimits(options: unknown): RateLimitConfig {
  const o = record('rateLimits', options);
  const names = Object.keys(RATE_LIMIT_KINDS);
  const bad = Object.keys(o).filter((k) => !names.includes(k));
  if (bad.length) throw new StampededConfigError(UNKNOWN_OPTIONS('StampededModule.forRoot(): control.rateLimits', bad, names));
  const config: RateLimitConfig = new Map();
  for (const [group, kind] of Object.entries(RATE_LIMIT_KINDS)) {
    if (o[group] === undefined) continue;
    const limits = new Map<string, { limit: number; ms: number }>();
    for (const [name, value] of Object.entries(record(`rateLimits.${group}`, o[group]))) {
      const where = `rateLimits.${group}.${name}`;
      const limit = record(where, value) as unknown as RateLimit;
      const unknown = Object.keys(limit).filter((k) => !(RATE_LIMIT_NAMES as readonly string[]).includes(k));
      if (unknown.length) throw new StampededConfigError(UNKNOWN_OPTIONS(`StampededModule.forRoot(): control.${where}`, unknown, RATE_LIMIT_NAMES));
      if (limit.per === undefined) throw fail(`${where}.per`, `is required: the window the limit counts starts in, such as '1s' or '1m'`);
      limits.set(name, { limit: positive(`${where}.limit`, limit.limit), ms: durationMs(`${where}.per`, limit.per, INVALID_CONTROL_OPTION) });
    }
    if (limits.size) config.set(kind, limits);
  }
  return config;
}

/**
 * A rate limit holds where the handlers start, not where the jobs are
 * claimed. The claim counts a sliding window at its own time c
 * (stampeded_claim_limited), and a job's handler starts a little after c:
 * the claim's round trip, the event loop. A claim that fills a window at
 * its end and the next one, a window later, would otherwise let the first
 * claim's late starts and the second's early ones into one window.
 *
 * So every job a limited claim takes must start within a grace g of c
 * (JobExecutor gives back one that cannot, without spending its attempt),
 * and the claim counts each window as ms + g. The starts in any window of
 * ms then come from claims within ms + g, of which there are at most
 * `limit`: at most `limit` starts in any window of ms, exactly, across the
 * fleet. The worker measures g on its monotonic clock from a time no later
 * than c: when it sent the claim, plus how far into its statement the claim
 * read c (a span on the database's clock, CLAIM_LIMITED), so no two hosts'
 * clocks need agree, and a claim's wait for another's locks is not taken
 * from its jobs' grace. A job given back has counted in its window, which
 * errs on the safe side.
 *
 * The cost is throughput: a sustained rate of `limit` per ms + g; and a job
 * given back late spends its room in the window and a round trip. g is 10%
 * of the window (a rate 9.1% under the limit), which a claim's round trip
 * and a busy event loop seldom outlast (NOTES.md, "Rate limits at the
 * handler's start"), at least minMs (a window of 100 ms pays 17%), and at
 * most maxMs (a window of a minute pays 0.4%).
 */
export const START_GRACE = { share: 0.1, minMs: 20, maxMs: 250 } as const;

/** The start grace of a rate limit whose window is `windowMs` (see START_GRACE). */
export function startGraceMs(windowMs: number): number {
  return Math.min(START_GRACE.maxMs, Math.max(START_GRACE.minMs, Math.round(windowMs * START_GRACE.share)));
}

/** What a limited claim of a queue passes and promises: the rules, and the grace its jobs start within. */
export interface RateLimitClaim {
  /** stampeded_claim_limited's p_rules, as JSON: each window widened by its start grace. */
  rules: string;
  /** The least grace of the rules: a job may fall under any of them. */
  startGraceMs: number;
}

/**
 * The rate limits of a claim of this queue: the queue's own limit, and
 * every task, tenant and destination limit (any of the queue's jobs may
 * fall under one). Null: the queue has none.
 */
export function rateLimitClaimFor(config: RateLimitConfig, queue: string): RateLimitClaim | null {
  const rules: Record<string, Record<string, { limit: number; ms: number }>> = {};
  let grace = Infinity;
  const widened = ({ limit, ms }: { limit: number; ms: number }) => {
    grace = Math.min(grace, startGraceMs(ms));
    return { limit, ms: ms + startGraceMs(ms) };
  };
  for (const [kind, limits] of config) {
    if (kind === 'queue') {
      const own = limits.get(queue) ?? limits.get('*');
      if (own) rules.queue = { [queue]: widened(own) };
    } else rules[kind] = Object.fromEntries([...limits].map(([name, limit]) => [name, widened(limit)]));
  }
  return Object.keys(rules).length ? { rules: JSON.stringify(rules), startGraceMs: grace } : null;
}

export function breakerConfigFor(config: ControlConfig, destination: string): BreakerConfig {
  return config.breakers.get(destination) ?? config.breakerDefault;
}

const POLICY_NAMES = ['maxRunning', 'maxWaitSecs'] as const;

/** A queue policy checked against the table's constraints (positive integers, or null to clear). */
export function validateQueuePolicy(where: string, policy: QueuePolicy | undefined): { maxRunning: number | null; maxWaitSecs: number | null } {
  if (policy === undefined) return { maxRunning: null, maxWaitSecs: null };
  if (typeof policy !== 'object' || policy === null || Array.isArray(policy)) {
    throw new StampededConfigError(`${where}: policy must be an object such as { maxRunning: 10, maxWaitSecs: 30 }, got ${JSON.stringify(policy)}.`);
  }
  const unknown = Object.keys(policy).filter((k) => !(POLICY_NAMES as readonly string[]).includes(k));
  if (unknown.length) throw new StampededConfigError(UNKNOWN_OPTIONS(`${where}: policy`, unknown, POLICY_NAMES));
  const check = (name: (typeof POLICY_NAMES)[number]) => {
    const value = policy[name];
    if (value === undefined || value === null) return null;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 2147483647) {
      throw new StampededConfigError(`${where}: policy.${name} must be a whole number from 1 to 2147483647 (or null for none), got ${JSON.stringify(value)}.`);
    }
    return value;
  };
  return { maxRunning: check('maxRunning'), maxWaitSecs: check('maxWaitSecs') };
}
