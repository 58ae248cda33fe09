import { Cron } from 'croner';
import { DEFAULT_QUEUE, LIMITS, RUNTIME_META_KEY } from '../stampeded.constants.js';
import { INVALID_SCHEDULE, UNKNOWN_OPTIONS } from '../stampeded.messages.js';
import { StampededConfigError } from '../errors/stampeded.errors.js';
import { toJsonObject, validateQueueName } from '../queue/job-input.validator.js';
import { durationMs } from '../maintenance/maintenance.config.js';
import type { DstPolicy, MissedPolicy, ScheduleDefinition } from '../interfaces/schedule.interface.js';
import { endOfGap, instantsOf, isTimeZone, offsetAt, offsetsAround } from './time-zone.js';

/** When a schedule fires: the part that next_run_at is computed from. */
export interface ScheduleRule {
  key: string;
  cron: string | null;
  intervalSecs: number | null;
  timezone: string;
  dstPolicy: DstPolicy;
  missedPolicy: MissedPolicy;
}

/** A schedule checked field by field and ready for the upsert. */
export interface ValidatedSchedule extends ScheduleRule {
  task: string;
  queue: string;
  /** JSON text. */
  args: string;
  meta: string;
  tenantId: string | null;
  priority: number;
  paused: boolean | null;
}

export const SCHEDULE_OPTION_NAMES = ['cron', 'every', 'timezone', 'dstPolicy', 'missedPolicy', 'args', 'key', 'priority', 'tenantId', 'orderingKey'] as const;
const DEFINITION_NAMES = [...SCHEDULE_OPTION_NAMES, 'task', 'queue', 'paused'] as const;

const KEY_MAX_LENGTH = 200;

function invalid(key: string, field: string, problem: string): never {
  throw new StampededConfigError(INVALID_SCHEDULE(key, field, problem));
}

/**
 * `'1h30m'` -> 5400 seconds. Read as every duration option is (durationMs):
 * a bare number is milliseconds. Whole seconds only: the ledger and
 * interval_secs count seconds.
 */
export function parseEvery(key: string, every: unknown): number {
  // 0.1.0 read a bare number as seconds, and every other duration option
  // reads one as milliseconds: `every: 5000` re-declared after an upgrade
  // would fire a thousand times as often. A number is refused, saying why,
  // rather than read either way.
  if (typeof every === 'number') {
    invalid(
      key,
      'every',
      `takes a duration with its unit, such as '${every}s' or '15m', got the number ${every} (0.1.0 read a number as seconds, other duration options read one as milliseconds)`,
    );
  }
  const ms = durationMs('every', every, (field, problem) => INVALID_SCHEDULE(key, field, problem));
  if (ms % 1000 !== 0) invalid(key, 'every', `must be a whole number of seconds, got ${JSON.stringify(every)}`);
  return ms / 1000;
}

const crons = new Map<string, Cron>();

/** The expression read in UTC, which has no DST: it enumerates wall-clock times, and time-zone.ts maps them to instants. */
function wallClockCron(expression: string): Cron {
  let cron = crons.get(expression);
  if (!cron) {
    cron = new Cron(expression, { utcOffset: 0, mode: '5-or-6-parts', paused: true });
    crons.set(expression, cron);
  }
  return cron;
}

function hasSecondsField(expression: string): boolean {
  return expression.trim().split(/\s+/).length === 6;
}

/**
 * Checks a schedule before anything is written: every error names the
 * schedule and the field, and says what a valid value looks like.
 */
export function validateSchedule(definition: ScheduleDefinition, now = new Date()): ValidatedSchedule {
  const key = typeof definition?.key === 'string' && definition.key ? definition.key : '(no key)';
  if (definition === null || typeof definition !== 'object') invalid(key, 'definition', 'must be an object');
  const unknown = Object.keys(definition).filter((k) => !(DEFINITION_NAMES as readonly string[]).includes(k));
  if (unknown.length) throw new StampededConfigError(UNKNOWN_OPTIONS(`Schedule "${key}"`, unknown, DEFINITION_NAMES));
  if (typeof definition.key !== 'string' || !definition.key || definition.key.length > KEY_MAX_LENGTH) {
    invalid(key, 'key', `must be a non-empty string of at most ${KEY_MAX_LENGTH} characters, got ${JSON.stringify(definition.key)}`);
  }
  if (typeof definition.task !== 'string' || !definition.task) invalid(key, 'task', `must name a task, got ${JSON.stringify(definition.task)}`);

  const hasCron = definition.cron !== undefined && definition.cron !== null;
  const hasEvery = definition.every !== undefined && definition.every !== null;
  if (hasCron === hasEvery) {
    invalid(key, 'cron/every', hasCron ? 'are both set; give exactly one of them' : "are both missing; give exactly one: cron: '0 3 * * *' or every: '15m'");
  }

  const timezone = definition.timezone ?? 'UTC';
  if (!isTimeZone(timezone)) {
    invalid(key, 'timezone', `${JSON.stringify(timezone)} is not a known IANA time zone; use a name such as 'Europe/Berlin', 'America/New_York' or 'UTC'`);
  }
  const dstPolicy = definition.dstPolicy ?? 'instant';
  if (dstPolicy !== 'instant' && dstPolicy !== 'wall_clock') invalid(key, 'dstPolicy', `must be 'instant' or 'wall_clock', got ${JSON.stringify(dstPolicy)}`);
  const missedPolicy = definition.missedPolicy ?? 'once';
  if (missedPolicy !== 'once' && missedPolicy !== 'skip') invalid(key, 'missedPolicy', `must be 'once' or 'skip', got ${JSON.stringify(missedPolicy)}`);

  let cron: string | null = null;
  let intervalSecs: number | null = null;
  if (hasCron) {
    if (typeof definition.cron !== 'string') invalid(key, 'cron', `must be a string, got ${JSON.stringify(definition.cron)}`);
    try {
      wallClockCron(definition.cron);
    } catch (err) {
      invalid(
        key,
        'cron',
        `${JSON.stringify(definition.cron)} is not a valid cron expression (${(err as Error).message.replace(/^CronPattern: /, '')}); ` +
          `write 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first`,
      );
    }
    if (dstPolicy === 'wall_clock' && hasSecondsField(definition.cron)) {
      invalid(
        key,
        'cron',
        "has a seconds field, which dstPolicy 'wall_clock' cannot honour (it keeps one occurrence per local minute); use dstPolicy 'instant'",
      );
    }
    cron = definition.cron;
  } else {
    intervalSecs = parseEvery(key, definition.every);
    if (dstPolicy === 'wall_clock') {
      invalid(
        key,
        'dstPolicy',
        "is 'wall_clock', but an interval counts absolute time and has no wall clock to follow; use dstPolicy 'instant' or a cron expression",
      );
    }
  }

  const queue = validateQueueName(`Schedule "${key}"`, 'queue', definition.queue ?? DEFAULT_QUEUE);
  const args = toJsonObject(`Schedule "${key}"`, 'args', definition.args ?? {}, LIMITS.argsBytes);
  const priority = definition.priority ?? 0;
  if (!Number.isInteger(priority) || priority < LIMITS.smallint.min || priority > LIMITS.smallint.max) {
    invalid(key, 'priority', `must be a whole number from ${LIMITS.smallint.min} to ${LIMITS.smallint.max}, got ${JSON.stringify(priority)}`);
  }
  if (definition.tenantId !== undefined && (typeof definition.tenantId !== 'string' || !definition.tenantId)) {
    invalid(key, 'tenantId', `must be a non-empty string, got ${JSON.stringify(definition.tenantId)}`);
  }
  if (definition.paused !== undefined && typeof definition.paused !== 'boolean') {
    invalid(key, 'paused', `must be true or false, got ${JSON.stringify(definition.paused)}`);
  }

  const rule: ScheduleRule = { key: definition.key, cron, intervalSecs, timezone, dstPolicy, missedPolicy };
  if (cron && nextOccurrence(rule, now) === null) {
    invalid(key, 'cron', `${JSON.stringify(cron)} never matches a date (February 30th, say); check the day and month fields`);
  }
  return {
    ...rule,
    task: definition.task,
    queue,
    args,
    meta: JSON.stringify({ [RUNTIME_META_KEY]: { schedule: definition.key } }),
    tenantId: definition.tenantId ?? null,
    priority,
    paused: definition.paused ?? null,
  };
}

/**
 * The first occurrence strictly after `after`, in the rule's zone and under
 * its DST policy; null when the expression never matches again.
 *
 * Away from a transition, wall time and UTC differ by one fixed offset and
 * cron answers directly. Near one, every wall time cron yields from a little
 * before `after` is mapped to its instants (none, one or two) and the policy
 * chooses among them; the window is the size of the offset change, so the
 * walk is short even for an expression with a seconds field.
 */
export function nextOccurrence(rule: ScheduleRule, after: Date): Date | null {
  const from = after.getTime();
  if (rule.intervalSecs !== null) return new Date(from + rule.intervalSecs * 1000);
  const cron = wallClockCron(rule.cron!);
  const tz = rule.timezone;
  const [before, later] = offsetsAround(from, tz);
  const offset = offsetAt(from, tz);
  const fixed = cron.nextRun(new Date(from + offset));
  if (!fixed) return null;
  const instant = fixed.getTime() - offset;
  // The fixed-offset answer holds when no transition lies between `from` and
  // it: the offset is the same at both ends, and either the answer is within
  // the hour (two transitions never are) or none is near `from` (a fall-back
  // just after `from` repeats wall times that the fixed offset never sees
  // again). Under wall_clock it must also be a wall time's first instance.
  if (
    offsetAt(instant, tz) === offset &&
    (instant - from <= 3_600_000 || before === later) &&
    (rule.dstPolicy === 'instant' || instantsOf(fixed.getTime(), tz)[0] === instant)
  ) {
    return new Date(instant);
  }

  // Every instant after `from` shows a wall time of at least from + the
  // smaller offset, and a wall time w is at least the instant w - the larger
  // offset: the walk starts at the first bound and stops at the second.
  const minOffset = Math.min(before, later, offset);
  const maxOffset = Math.max(before, later, offset);
  let wall: Date | null = new Date(from + minOffset - 1000);
  let best: number | null = null;
  for (let steps = 0; steps < 200_000; steps++) {
    wall = cron.nextRun(wall);
    if (!wall) break;
    const w = wall.getTime();
    if (best !== null && w - maxOffset > best) break;
    for (const instant of candidateInstants(w, rule)) {
      if (instant > from && (best === null || instant < best)) best = instant;
    }
  }
  return best === null ? null : new Date(best);
}

function candidateInstants(wall: number, rule: ScheduleRule): number[] {
  const instants = instantsOf(wall, rule.timezone);
  if (rule.dstPolicy === 'instant') return instants;
  // wall_clock: once per local time. A repeated time fires at its first
  // instance; a skipped one when the clocks land after the gap.
  return instants.length ? [instants[0]] : [endOfGap(wall, rule.timezone)];
}

/**
 * next_run_at for a new schedule, or one whose rule changed. An interval
 * starts on a whole second, so that its occurrences (and their ledger
 * tokens, which count seconds) fall on whole seconds too.
 */
export function firstRunAt(rule: ScheduleRule, now: Date): Date {
  if (rule.intervalSecs !== null) return new Date(Math.ceil(now.getTime() / 1000) * 1000 + rule.intervalSecs * 1000);
  return nextOccurrence(rule, now) ?? new Date(8.64e15);
}

export interface FiringPlan {
  fire: boolean;
  /** The occurrence was reached later than the grace allows. */
  missed: boolean;
  nextRunAt: Date;
}

/**
 * What to do with an occurrence that is due. Within `graceMs` of its time it
 * fires, and the next run is the occurrence after it, so that a fleet that is
 * a little behind catches up without losing any. Later than that it was
 * missed (the fleet was down): `once` fires it as the single catch-up, `skip`
 * does not; either way the rhythm resumes at the first occurrence after now.
 */
export function planFiring(rule: ScheduleRule, dueAt: Date, now: Date, graceMs: number): FiringPlan {
  const late = now.getTime() - dueAt.getTime();
  if (late <= graceMs) {
    return { fire: true, missed: false, nextRunAt: nextOccurrence(rule, dueAt) ?? new Date(8.64e15) };
  }
  let nextRunAt: Date;
  if (rule.intervalSecs !== null) {
    // Keep the interval's phase: the first dueAt + k * interval after now.
    const period = rule.intervalSecs * 1000;
    const k = Math.floor(late / period) + 1;
    nextRunAt = new Date(dueAt.getTime() + k * period);
  } else {
    nextRunAt = nextOccurrence(rule, now) ?? new Date(8.64e15);
  }
  return { fire: rule.missedPolicy === 'once', missed: true, nextRunAt };
}
