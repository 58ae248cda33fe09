import type { Duration } from './maintenance.interface.js';

/**
 * `instant` fires at every absolute instant the expression matches: a time
 * repeated by a fall-back fires twice, a time skipped by a spring-forward
 * never. `wall_clock` fires once per local wall-clock time: the repeated time
 * once (at its first instance), the skipped time once, when the gap ends.
 */
export type DstPolicy = 'instant' | 'wall_clock';

/**
 * After downtime: `once` fires one catch-up occurrence and resumes the normal
 * rhythm; `skip` fires none and resumes at the next future occurrence.
 */
export type MissedPolicy = 'once' | 'skip';

/** A task's schedule, as @Task('name', { schedule }) declares it. */
export interface TaskScheduleOptions {
  /** A 5-field cron expression (minute hour day month weekday), or 6 fields with seconds first. */
  cron?: string;
  /** An interval instead of a cron expression, with its unit: `'15m'`, `'1h30m'`, `'45s'`, `'1d'` (whole seconds). */
  every?: string;
  /** The IANA zone the cron expression is read in. Default `'UTC'`. */
  timezone?: string;
  /** Default `'instant'`. */
  dstPolicy?: DstPolicy;
  /** Default `'once'`. */
  missedPolicy?: MissedPolicy;
  /** The job's args, one JSON object. Default `{}`. */
  args?: Record<string, unknown>;
  /** The schedule's stable key. Default: the task name. */
  key?: string;
  /** Priority of the jobs it enqueues. Default: the task's, else 0. */
  priority?: number;
  tenantId?: string;
  /** The ordering key its jobs run under (docs/ordering.md): one at a time, in firing order, with the other jobs of the key. */
  orderingKey?: string;
}

/** A schedule as SchedulesService.upsert() takes it. */
export interface ScheduleDefinition extends Omit<TaskScheduleOptions, 'key'> {
  key: string;
  /** The task its jobs run. */
  task: string;
  /** Default: the queue of the task when this app declares it, else `default`. */
  queue?: string;
  /** Set to pause or resume; left out, an existing schedule keeps its state (new ones start running). */
  paused?: boolean;
}

/** A schedule as stored. */
export interface Schedule {
  key: string;
  queue: string;
  task: string;
  args: Record<string, unknown>;
  tenantId: string | null;
  /** The ordering key its jobs are fired with, or null. */
  orderingKey: string | null;
  priority: number;
  cron: string | null;
  intervalSeconds: number | null;
  timezone: string;
  dstPolicy: DstPolicy;
  missedPolicy: MissedPolicy;
  paused: boolean;
  nextRunAt: Date;
  lastRunAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

/** What one scheduler tick did: for logs, tests and the dashboard. */
export interface ScheduleFiring {
  key: string;
  /** The occurrence: the instant it was due. */
  dueAt: Date;
  /** The enqueued job, or null when the occurrence was skipped or already fired by another process. */
  jobId: string | null;
  outcome: 'fired' | 'duplicate' | 'skipped';
  nextRunAt: Date;
}

export interface SchedulesOptions {
  /** Fire due schedules from this process. Declared schedules are upserted either way. Default true. */
  enabled?: boolean;
  /** How often this process looks for due schedules. Default 1000 ms. */
  pollIntervalMs?: number;
  /** Schedules claimed per transaction. Default 100. */
  batchSize?: number;
  /**
   * How late an occurrence may be reached and still count as on time. Later
   * than this it was missed, and the schedule's missedPolicy decides. Default '60s'.
   */
  misfireGrace?: Duration;
}
