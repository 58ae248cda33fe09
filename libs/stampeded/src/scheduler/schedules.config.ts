import { INVALID_SCHEDULES_OPTION, UNKNOWN_OPTIONS } from '../stampeded.messages.js';
import { StampededConfigError } from '../errors/stampeded.errors.js';
import { durationMs } from '../maintenance/maintenance.config.js';
import type { SchedulesOptions } from '../interfaces/schedule.interface.js';

export interface SchedulesConfig {
  enabled: boolean;
  pollIntervalMs: number;
  batchSize: number;
  misfireGraceMs: number;
}

/**
 * A one-second poll: an every-second schedule is then fired within a second
 * of its time by a single process, and sooner by a fleet, whose polls fall at
 * different moments. The grace is Quartz's misfire threshold, a minute: a
 * fleet restarted in under a minute loses nothing, even under 'skip'.
 */
export const SCHEDULES_DEFAULTS: SchedulesConfig = { enabled: true, pollIntervalMs: 1000, batchSize: 100, misfireGraceMs: 60_000 };

const OPTION_NAMES = ['enabled', 'pollIntervalMs', 'batchSize', 'misfireGrace'] as const;

export function resolveSchedulesConfig(options: SchedulesOptions | undefined): SchedulesConfig {
  const o = options ?? {};
  const unknown = Object.keys(o).filter((k) => !(OPTION_NAMES as readonly string[]).includes(k));
  if (unknown.length) throw new StampededConfigError(UNKNOWN_OPTIONS('StampededModule.forRoot(): schedules', unknown, OPTION_NAMES));
  if (o.enabled !== undefined && typeof o.enabled !== 'boolean') {
    throw new StampededConfigError(INVALID_SCHEDULES_OPTION('enabled', `must be true or false, got ${JSON.stringify(o.enabled)}`));
  }
  for (const key of ['pollIntervalMs', 'batchSize'] as const) {
    const value = o[key];
    if (value !== undefined && (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1)) {
      throw new StampededConfigError(INVALID_SCHEDULES_OPTION(key, `must be a whole number of 1 or more, got ${JSON.stringify(value)}`));
    }
  }
  return {
    enabled: o.enabled ?? SCHEDULES_DEFAULTS.enabled,
    pollIntervalMs: o.pollIntervalMs ?? SCHEDULES_DEFAULTS.pollIntervalMs,
    batchSize: o.batchSize ?? SCHEDULES_DEFAULTS.batchSize,
    misfireGraceMs: o.misfireGrace === undefined ? SCHEDULES_DEFAULTS.misfireGraceMs : durationMs('misfireGrace', o.misfireGrace, INVALID_SCHEDULES_OPTION),
  };
}
