import { Inject, Injectable } from '@nestjs/common';
import { Subject, type Observable } from 'rxjs';
import { DEFAULT_QUEUE, JOB_COLUMN_DEFAULTS, LIMITS, STAMPEDED_OPTIONS } from '../stampeded.constants.js';
import { JobEncryption } from '../encryption/job-encryption.js';
import type { JobColumnDefaults } from '../queue/job-column-defaults.js';
import { INVALID_ARGS, INVALID_SCHEDULE, SCHEDULE_NOT_FOUND } from '../stampeded.messages.js';
import { InvalidJobError, StampededConfigError } from '../errors/stampeded.errors.js';
import { StampededDatabase } from '../database/stampeded-database.js';
import { TaskRegistry } from '../explorer/task.registry.js';
import { QueueRegistry } from '../queue/queue.registry.js';
import { JobRowBuilder } from '../queue/job-row.builder.js';
import { SETTING_COLUMNS } from '../queue/job-columns.js';
import {
  GET_SCHEDULE,
  LIST_OCCURRENCES,
  LIST_SCHEDULES,
  REMOVE_SCHEDULE,
  SERVER_KNOWS_ZONE,
  SET_SCHEDULE_PAUSED,
  TRIGGER_SCHEDULE,
  UPSERT_SCHEDULE,
} from '../sql/schedules.sql.js';
import type { StampededModuleOptions } from '../interfaces/stampeded-options.interface.js';
import type { StampededClock } from '../interfaces/clock.interface.js';
import type { Schedule, ScheduleDefinition, ScheduleFiring } from '../interfaces/schedule.interface.js';
import { firstRunAt, validateSchedule } from './schedule-rule.js';
import { resolveSchedulesConfig, type SchedulesConfig } from './schedules.config.js';
import { ScheduleFirer } from './schedule-firer.js';
import { toSchedule } from './schedule.mapper.js';

export interface ScheduleOccurrence {
  token: string;
  jobId: string | null;
  enqueuedAt: Date;
}

/**
 * Schedules at run time: create or change one, pause, resume, remove, list,
 * fire one now. Declared schedules (@Task(name, { schedule })) go through
 * the same upsert at bootstrap.
 */
@Injectable()
export class SchedulesService {
  private readonly subject = new Subject<ScheduleFiring>();
  /** Every occurrence this process fired, skipped or found already fired. */
  readonly firings$: Observable<ScheduleFiring> = this.subject.asObservable();
  readonly config: SchedulesConfig;
  private readonly firer: ScheduleFirer;
  private readonly clock?: StampededClock;
  private readonly jobRows: JobRowBuilder;
  private readonly encryption: JobEncryption;

  constructor(
    private readonly db: StampededDatabase,
    private readonly tasks: TaskRegistry,
    queues: QueueRegistry,
    @Inject(STAMPEDED_OPTIONS) private readonly options: StampededModuleOptions,
    @Inject(JOB_COLUMN_DEFAULTS) columnDefaults: JobColumnDefaults,
  ) {
    this.encryption = new JobEncryption(options, queues);
    this.jobRows = new JobRowBuilder(tasks, queues, options, columnDefaults, this.encryption);
    this.config = resolveSchedulesConfig(options.schedules);
    this.clock = options.clock;
    this.firer = new ScheduleFirer(db, this.config, this.clock);
  }

  /** The scheduler's time: the test clock's when one is set. */
  now(): Date {
    return this.clock?.now() ?? new Date();
  }

  /**
   * Creates the schedule, or updates it under the same key. Its next run is
   * kept unless the rule (cron or interval, zone, DST policy) changed; its
   * paused state is kept unless `paused` is given.
   */
  async upsert(definition: ScheduleDefinition): Promise<Schedule> {
    const queue = definition.queue ?? this.taskQueue(definition.task);
    const schedule = validateSchedule({ ...definition, queue }, this.now());
    // Every job it fires has these args (as JSON, as its jobs carry them): refused now, not once per firing.
    const task = this.tasks.resolve(schedule.task);
    const issues = await task.argsValidator?.issues(JSON.parse(schedule.args));
    if (issues?.length) throw new InvalidJobError(INVALID_ARGS(`Schedule "${schedule.key}"`, schedule.task, issues));
    // Stored sealed, and copied as they are into each job it fires: the jobs are sealed too (stampeded_schedule_job).
    const args = this.encryption.required(task.encrypt, schedule.queue)
      ? this.encryption.seal(`Schedule "${schedule.key}"`, 'args', schedule.task, schedule.args, LIMITS.argsBytes)
      : schedule.args;
    const [{ known, server_now }] = await this.db.query<{ known: boolean; server_now: Date }>(SERVER_KNOWS_ZONE, [schedule.timezone]);
    if (!known) {
      throw new StampededConfigError(
        INVALID_SCHEDULE(
          schedule.key,
          'timezone',
          `${JSON.stringify(schedule.timezone)} is known to Node.js but not to the PostgreSQL server; use a zone both know`,
        ),
      );
    }
    const [row] = await this.db.query(UPSERT_SCHEDULE, [
      schedule.key,
      schedule.queue,
      schedule.task,
      args,
      schedule.meta,
      schedule.tenantId,
      schedule.priority,
      schedule.intervalSecs,
      schedule.cron,
      // From the database's clock, like every other decision about when:
      // a process whose own clock is off must not move a schedule.
      firstRunAt(schedule, this.clock?.now() ?? server_now),
      schedule.dstPolicy,
      schedule.timezone,
      schedule.missedPolicy,
      schedule.paused,
      this.jobOptionsFor(schedule.key, schedule.task, schedule.queue, definition.orderingKey),
    ]);
    return this.readable(row);
  }

  /** A schedule as the app reads it: its args opened where this process holds their key. */
  private readable(row: Record<string, any>): Schedule {
    const schedule = toSchedule(row);
    schedule.args = this.encryption.readable(schedule.task, schedule.args) as Schedule['args'];
    return schedule;
  }

  /**
   * The options a job of this task gets when enqueued by hand -- module,
   * queue and task defaults, in that order, as JobRowBuilder layers them --
   * as the columns the schedule's jobs are inserted with: the settings of
   * JOB_COLUMNS, and the ordering key when there is one. A task this process
   * does not declare gets the module's and the queue's.
   */
  private jobOptionsFor(key: string, task: string, queue: string, orderingKey?: string): string {
    // The key is checked as enqueue() checks it: the same refusals, naming the schedule.
    const { row } = this.jobRows.row(`Schedule "${key}"`, { task, options: { queue, orderingKey } });
    const stored: Record<string, unknown> = Object.fromEntries(SETTING_COLUMNS.map((column) => [column, row[column]]));
    if (row.ordering_key !== null) stored.ordering_key = row.ordering_key;
    return JSON.stringify(stored);
  }

  private taskQueue(task: string): string {
    return this.tasks.resolve(task).defaults.queue ?? this.options.defaultJobOptions?.queue ?? DEFAULT_QUEUE;
  }

  /** Stops firing; occurrences that fall due while paused are missed, and handled by the missed policy on resume. */
  pause(key: string): Promise<Schedule> {
    return this.setPaused(key, true);
  }

  resume(key: string): Promise<Schedule> {
    return this.setPaused(key, false);
  }

  private async setPaused(key: string, paused: boolean): Promise<Schedule> {
    const [row] = await this.db.query(SET_SCHEDULE_PAUSED, [key, paused]);
    if (!row) throw new StampededConfigError(SCHEDULE_NOT_FOUND(key));
    return this.readable(row);
  }

  /** Deletes the schedule and its occurrence ledger; false when there was none. Jobs it enqueued stay. */
  async remove(key: string): Promise<boolean> {
    return (await this.db.query(REMOVE_SCHEDULE, [key])).length > 0;
  }

  async list(): Promise<Schedule[]> {
    return (await this.db.query(LIST_SCHEDULES)).map((row) => this.readable(row));
  }

  async get(key: string): Promise<Schedule | undefined> {
    const [row] = await this.db.query(GET_SCHEDULE, [key]);
    return row ? this.readable(row) : undefined;
  }

  /** Fires the schedule now, outside its rhythm; its next run is unchanged. */
  async trigger(key: string): Promise<{ jobId: string }> {
    const [row] = await this.db.query<{ job_id: string }>(TRIGGER_SCHEDULE, [key]);
    if (!row) throw new StampededConfigError(SCHEDULE_NOT_FOUND(key));
    return { jobId: row.job_id };
  }

  /** The newest entries of the schedule's occurrence ledger, newest first. */
  async occurrences(key: string, limit = 100): Promise<ScheduleOccurrence[]> {
    const rows = await this.db.query(LIST_OCCURRENCES, [key, limit]);
    return rows.map((r) => ({ token: r.occurrence_token, jobId: r.job_id, enqueuedAt: r.enqueued_at }));
  }

  /**
   * Fires whatever is due now (by the test clock, when one is set) and says
   * what happened. The background loop calls this every pollIntervalMs; a
   * test calls it after moving the clock.
   */
  async fireDue(): Promise<ScheduleFiring[]> {
    const firings = await this.firer.fireDue();
    for (const firing of firings) this.subject.next(firing);
    return firings;
  }

  /** @internal */
  complete(): void {
    this.subject.complete();
  }
}
