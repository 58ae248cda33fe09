import { Inject, Injectable, Logger, type BeforeApplicationShutdown, type OnApplicationBootstrap, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, Reflector } from '@nestjs/core';
import { DEFAULT_QUEUE, instanceNameOf, STAMPEDED_OPTIONS, TASK_METADATA } from '../stampeded.constants.js';
import { INVALID_SCHEDULE, UNKNOWN_OPTIONS } from '../stampeded.messages.js';
import { StampededConfigError } from '../errors/stampeded.errors.js';
import type { StampededModuleOptions } from '../interfaces/stampeded-options.interface.js';
import type { TaskMetadata } from '../interfaces/task.interface.js';
import type { ScheduleDefinition } from '../interfaces/schedule.interface.js';
import { SCHEDULE_OPTION_NAMES, validateSchedule } from './schedule-rule.js';
import { SchedulesService } from './schedules.service.js';

/**
 * Collects the schedules that @Task() declares at module init (a bad one
 * stops the app before anything runs), upserts them at bootstrap, and fires
 * due schedules every pollIntervalMs until shutdown.
 *
 * The poll timer is unreferenced: an app whose startup failed after this
 * began is never closed, and its scheduler must not hold the process open.
 */
@Injectable()
export class SchedulerOrchestrator implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Stampeded');
  private declared: ScheduleDefinition[] = [];
  private timer?: NodeJS.Timeout;
  private ticking?: Promise<void>;
  private stopped = false;
  private failing = false;

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly reflector: Reflector,
    private readonly schedules: SchedulesService,
    @Inject(STAMPEDED_OPTIONS) private readonly options: StampededModuleOptions,
  ) {}

  onModuleInit(): void {
    const byKey = new Map<string, string>();
    for (const wrapper of this.discovery.getProviders()) {
      if (!wrapper.metatype || !wrapper.isDependencyTreeStatic()) continue;
      const metadata = this.reflector.get<TaskMetadata | undefined>(TASK_METADATA, wrapper.metatype);
      // Another instance's task is scheduled in that instance's database (the explorer checks the name).
      if (!metadata?.schedule || instanceNameOf(metadata.instance) !== instanceNameOf(this.options.name)) continue;
      const schedule = metadata.schedule;
      const key = schedule.key ?? metadata.name;
      if (typeof schedule !== 'object' || schedule === null) {
        throw new StampededConfigError(INVALID_SCHEDULE(key, 'schedule', `on @Task('${metadata.name}') must be an object such as { cron: '0 3 * * *' }`));
      }
      const unknown = Object.keys(schedule).filter((k) => !(SCHEDULE_OPTION_NAMES as readonly string[]).includes(k));
      if (unknown.length) throw new StampededConfigError(UNKNOWN_OPTIONS(`@Task('${metadata.name}') schedule`, unknown, SCHEDULE_OPTION_NAMES));
      const other = byKey.get(key);
      if (other && other !== metadata.name) {
        throw new StampededConfigError(
          INVALID_SCHEDULE(key, 'key', `is declared by both @Task('${other}') and @Task('${metadata.name}'); give one of them schedule.key`),
        );
      }
      byKey.set(key, metadata.name);
      const definition: ScheduleDefinition = {
        ...schedule,
        key,
        task: metadata.name,
        queue: metadata.queue ?? this.options.defaultJobOptions?.queue ?? DEFAULT_QUEUE,
        priority: schedule.priority ?? metadata.priority,
      };
      if (definition.priority === undefined) delete definition.priority;
      validateSchedule(definition);
      this.declared.push(definition);
    }
  }

  async onApplicationBootstrap(): Promise<void> {
    for (const definition of this.declared) await this.schedules.upsert(definition);
    if (this.declared.length) this.logger.log(`schedules upserted: ${this.declared.map((d) => d.key).join(', ')}`);
    if (this.schedules.config.enabled) this.tick(0);
  }

  private tick(delayMs: number): void {
    this.timer = setTimeout(() => {
      this.ticking = this.schedules.fireDue().then(
        () => {
          if (this.failing) this.logger.log('scheduler: firing schedules again');
          this.failing = false;
        },
        (err: unknown) => {
          // Once per outage, not once a second: a database that is down for
          // a minute is one error in the log, and one recovery.
          if (!this.stopped && !this.failing) this.logger.error(`scheduler: could not fire due schedules: ${(err as Error)?.message ?? err}`);
          this.failing = true;
        },
      );
      void this.ticking.then(() => {
        if (!this.stopped) this.tick(this.schedules.config.pollIntervalMs);
      });
    }, delayMs).unref();
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.ticking;
    this.schedules.complete();
  }
}
