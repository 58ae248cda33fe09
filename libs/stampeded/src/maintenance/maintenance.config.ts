import { INVALID_MAINTENANCE_OPTION, UNKNOWN_OPTIONS } from '../stampeded.messages.js';
import { StampededConfigError } from '../errors/stampeded.errors.js';
import type { MaintenanceOptions } from '../interfaces/maintenance.interface.js';

/** Every maintenance setting, resolved: milliseconds and counts. */
export interface MaintenanceConfig {
  enabled: boolean;
  leaderCheckIntervalMs: number;
  reapIntervalMs: number;
  reapDeadAfterMs: number;
  expireIntervalMs: number;
  expireBatchSize: number;
  orderingSweepIntervalMs: number;
  pruneIntervalMs: number;
  completedRetentionMs: number;
  failedRetentionMs: number;
  occurrenceRetentionMs: number;
  pruneBatchSize: number;
  pruneMaxDurationMs: number;
  partitionCheckIntervalMs: number;
  healthIntervalMs: number;
  reindex: boolean;
  reindexIntervalMs: number;
  /** The insights rollup (InsightsRollup): on, and its settings. */
  insights: boolean;
  insightsIntervalMs: number;
  insightsSettleMs: number;
  insightsBatchSize: number;
  insightsMinuteRetentionMs: number;
  insightsHourRetentionMs: number;
}

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/**
 * Defaults, and why. The reaper waits for 12 missed heartbeats at the
 * worker's default 5 s before it calls a worker dead: a long GC pause or a
 * slow deploy must not have its jobs run twice. Retention follows the seed's
 * own defaults for stampeded_prune (1 hour completed, 7 days failed) and
 * stampeded_prune_occurrences (30 days).
 */
export const MAINTENANCE_DEFAULTS: MaintenanceConfig = {
  enabled: true,
  leaderCheckIntervalMs: 5 * SECOND,
  reapIntervalMs: 30 * SECOND,
  reapDeadAfterMs: MINUTE,
  expireIntervalMs: 30 * SECOND,
  expireBatchSize: 100,
  // The longest a keyed job can wait with nothing ahead of it, left so by an
  // enqueue that raced the outcome of the job ahead: rare, and cheap to look
  // for (one index descent per waiting key), so looked for often.
  orderingSweepIntervalMs: 5 * SECOND,
  pruneIntervalMs: MINUTE,
  completedRetentionMs: HOUR,
  failedRetentionMs: 7 * DAY,
  occurrenceRetentionMs: 30 * DAY,
  pruneBatchSize: 10_000,
  // One tick may not hold the leader for longer than this; the rest of a
  // backlog waits for the next tick rather than starving the other services.
  pruneMaxDurationMs: 5 * SECOND,
  partitionCheckIntervalMs: 5 * MINUTE,
  healthIntervalMs: 5 * MINUTE,
  reindex: false,
  reindexIntervalMs: HOUR,
  // The rollup reads a job once it finished this long ago: longer than any
  // transaction that finishes jobs stays open (stampeded_rollup_insights.sql),
  // short enough that a chart's last minute is at most a minute behind.
  insights: true,
  insightsIntervalMs: 15 * SECOND,
  insightsSettleMs: 30 * SECOND,
  insightsBatchSize: 10_000,
  // Minutes for the last-hour chart, and a day's margin; hours for the week.
  insightsMinuteRetentionMs: 2 * DAY,
  insightsHourRetentionMs: 30 * DAY,
};

const OPTION_NAMES = [
  'enabled',
  'leaderCheckIntervalMs',
  'reapIntervalMs',
  'reapDeadAfter',
  'expireIntervalMs',
  'expireBatchSize',
  'orderingSweepIntervalMs',
  'pruneIntervalMs',
  'completedRetention',
  'failedRetention',
  'occurrenceRetention',
  'pruneBatchSize',
  'pruneMaxDurationMs',
  'partitionCheckIntervalMs',
  'healthIntervalMs',
  'reindex',
  'insights',
] as const;

const INSIGHTS_OPTION_NAMES = ['intervalMs', 'settle', 'batchSize', 'minuteRetention', 'hourRetention'] as const;

const UNIT_MS: Record<string, number> = { ms: 1, s: SECOND, m: MINUTE, h: HOUR, d: DAY };

/** A duration as milliseconds, or a string such as '90s', '1h', '7d', '1h30m'. */
export function durationMs(option: string, value: unknown, message: (option: string, problem: string) => string = INVALID_MAINTENANCE_OPTION): number {
  let ms: number;
  if (typeof value === 'number') ms = value;
  else if (typeof value === 'string' && /^\s*(\d+\s*(ms|s|m|h|d)\s*)+$/.test(value)) {
    ms = 0;
    for (const [, n, unit] of value.matchAll(/(\d+)\s*(ms|s|m|h|d)/g)) ms += Number(n) * UNIT_MS[unit];
  } else {
    throw new StampededConfigError(message(option, `must be milliseconds or a duration such as '90s', '1h' or '7d', got ${JSON.stringify(value)}`));
  }
  if (!Number.isSafeInteger(ms) || ms < 1) {
    throw new StampededConfigError(message(option, `must be a duration of at least 1 ms, got ${JSON.stringify(value)}`));
  }
  return ms;
}

function count(option: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new StampededConfigError(INVALID_MAINTENANCE_OPTION(option, `must be a whole number of 1 or more, got ${JSON.stringify(value)}`));
  }
  return value;
}

/**
 * Resolves and checks the maintenance options: a bad value fails at startup,
 * naming the option, rather than as a leader that silently never prunes.
 */
export function resolveMaintenanceConfig(options: MaintenanceOptions | undefined, workerHeartbeatMs = 5000): MaintenanceConfig {
  const o = options ?? {};
  const unknown = Object.keys(o).filter((k) => !(OPTION_NAMES as readonly string[]).includes(k));
  if (unknown.length) throw new StampededConfigError(UNKNOWN_OPTIONS('StampededModule.forRoot(): maintenance', unknown, OPTION_NAMES));
  if (o.enabled !== undefined && typeof o.enabled !== 'boolean') {
    throw new StampededConfigError(INVALID_MAINTENANCE_OPTION('enabled', `must be true or false, got ${JSON.stringify(o.enabled)}`));
  }
  const d = MAINTENANCE_DEFAULTS;
  const ms = (option: keyof MaintenanceOptions, fallback: number) => (o[option] === undefined ? fallback : durationMs(option, o[option]));
  const reindex = o.reindex ?? false;
  if (typeof reindex !== 'boolean' && (typeof reindex !== 'object' || reindex === null)) {
    throw new StampededConfigError(INVALID_MAINTENANCE_OPTION('reindex', `must be true, false or { intervalMs }, got ${JSON.stringify(reindex)}`));
  }
  const insights = o.insights ?? true;
  if (typeof insights !== 'boolean' && (typeof insights !== 'object' || insights === null)) {
    throw new StampededConfigError(
      INVALID_MAINTENANCE_OPTION('insights', `must be true, false or { ${INSIGHTS_OPTION_NAMES.join(', ')} }, got ${JSON.stringify(insights)}`),
    );
  }
  const io = typeof insights === 'object' ? insights : {};
  const unknownInsights = Object.keys(io).filter((k) => !(INSIGHTS_OPTION_NAMES as readonly string[]).includes(k));
  if (unknownInsights.length) {
    throw new StampededConfigError(UNKNOWN_OPTIONS('StampededModule.forRoot(): maintenance.insights', unknownInsights, INSIGHTS_OPTION_NAMES));
  }
  const insightsMs = (option: (typeof INSIGHTS_OPTION_NAMES)[number], fallback: number) =>
    io[option] === undefined ? fallback : durationMs(`insights.${option}`, io[option]);
  const config: MaintenanceConfig = {
    enabled: o.enabled ?? d.enabled,
    leaderCheckIntervalMs: ms('leaderCheckIntervalMs', d.leaderCheckIntervalMs),
    reapIntervalMs: ms('reapIntervalMs', d.reapIntervalMs),
    reapDeadAfterMs: ms('reapDeadAfter', d.reapDeadAfterMs),
    expireIntervalMs: ms('expireIntervalMs', d.expireIntervalMs),
    expireBatchSize: count('expireBatchSize', o.expireBatchSize, d.expireBatchSize),
    orderingSweepIntervalMs: ms('orderingSweepIntervalMs', d.orderingSweepIntervalMs),
    pruneIntervalMs: ms('pruneIntervalMs', d.pruneIntervalMs),
    completedRetentionMs: ms('completedRetention', d.completedRetentionMs),
    failedRetentionMs: ms('failedRetention', d.failedRetentionMs),
    occurrenceRetentionMs: ms('occurrenceRetention', d.occurrenceRetentionMs),
    pruneBatchSize: count('pruneBatchSize', o.pruneBatchSize, d.pruneBatchSize),
    pruneMaxDurationMs: ms('pruneMaxDurationMs', d.pruneMaxDurationMs),
    partitionCheckIntervalMs: ms('partitionCheckIntervalMs', d.partitionCheckIntervalMs),
    healthIntervalMs: ms('healthIntervalMs', d.healthIntervalMs),
    reindex: reindex !== false,
    reindexIntervalMs:
      typeof reindex === 'object' && reindex.intervalMs !== undefined ? durationMs('reindex.intervalMs', reindex.intervalMs) : d.reindexIntervalMs,
    insights: insights !== false,
    insightsIntervalMs: insightsMs('intervalMs', d.insightsIntervalMs),
    insightsSettleMs: insightsMs('settle', d.insightsSettleMs),
    insightsBatchSize: count('insights.batchSize', io.batchSize, d.insightsBatchSize),
    insightsMinuteRetentionMs: insightsMs('minuteRetention', d.insightsMinuteRetentionMs),
    insightsHourRetentionMs: insightsMs('hourRetention', d.insightsHourRetentionMs),
  };
  // A worker is dead when it has missed several heartbeats, not one: closer
  // than three and a live worker's jobs are reaped and run twice.
  if (config.reapDeadAfterMs < 3 * workerHeartbeatMs) {
    throw new StampededConfigError(
      INVALID_MAINTENANCE_OPTION(
        'reapDeadAfter',
        `is ${config.reapDeadAfterMs} ms, less than three worker heartbeats (worker.heartbeatIntervalMs is ${workerHeartbeatMs} ms); ` +
          `a live worker's jobs would be reaped and run twice. Raise it to ${3 * workerHeartbeatMs} ms or more`,
      ),
    );
  }
  return config;
}
