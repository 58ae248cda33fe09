import { Global, Injectable, Module } from '@nestjs/common';
import { StampededConfigError } from '../errors/stampeded.errors.js';
import { DEFAULT_INSTANCE, DEFAULT_QUEUE } from '../stampeded.constants.js';
import { CLAIMED_BY_TWO_INSTANCES, DUPLICATE_INSTANCE, WORKED_QUEUE_OF_ANOTHER_INSTANCE } from './instance.messages.js';
import type { StampededDatabase } from '../database/stampeded-database.js';
import type { QueueService } from '../queue/queue.service.js';
import type { JobEvents } from '../events/job-events.js';
import type { WorkerOrchestrator } from '../worker/worker.orchestrator.js';
import type { MaintenanceService } from '../maintenance/maintenance.service.js';
import type { SchedulesService } from '../scheduler/schedules.service.js';
import type { QueueControlService } from '../control/queue-control.service.js';
import type { TaskRegistry } from '../explorer/task.registry.js';
import type { QueueRegistry } from '../queue/queue.registry.js';
import type { ReadDatabase } from '../database/read-database.js';
import type { StampededModuleOptions } from '../interfaces/stampeded-options.interface.js';

/** One instance of Stampeded in an app: one database's queue, with its services. */
export interface StampededInstance {
  readonly name: string;
  readonly options: StampededModuleOptions;
  readonly database: StampededDatabase;
  /** Where the instance's dashboard, metrics and display reads go: its replica when readConnection names one, else its database. */
  readonly reads: ReadDatabase;
  readonly queue: QueueService;
  readonly events: JobEvents;
  readonly worker: WorkerOrchestrator;
  readonly maintenance: MaintenanceService;
  readonly schedules: SchedulesService;
  readonly control: QueueControlService;
  readonly tasks: TaskRegistry;
  readonly queues: QueueRegistry;
}

/**
 * The instances of one app, by name, in the order they were declared. One per
 * app (a global module of a static class), so that each instance can see what
 * the others claim; never a static field, as two apps in one process must not
 * see each other's.
 */
@Injectable()
export class StampededInstances {
  private readonly instances = new Map<string, StampededInstance>();
  /** Which instance owns each task name and each queue name (the default queue aside: every database has one). */
  private readonly owners = { task: new Map<string, string>(), queue: new Map<string, string>() };

  add(instance: StampededInstance): StampededInstance {
    if (this.instances.has(instance.name)) throw new StampededConfigError(DUPLICATE_INSTANCE(instance.name));
    this.instances.set(instance.name, instance);
    return instance;
  }

  get(name: string): StampededInstance | undefined {
    return this.instances.get(name);
  }

  has(name: string): boolean {
    return this.instances.has(name);
  }

  /** The names, the default instance first and the others in alphabetical order, whichever order Nest built them in. */
  names(): string[] {
    return [...this.instances.keys()].sort((a, b) => (a === DEFAULT_INSTANCE ? -1 : b === DEFAULT_INSTANCE ? 1 : a.localeCompare(b)));
  }

  all(): StampededInstance[] {
    return this.names().map((name) => this.instances.get(name)!);
  }

  /**
   * Records that `instance` handles these tasks and queues, and refuses a
   * name another instance already holds: a task's jobs and its handler
   * must meet in one database, and a queue is found by its name alone
   * (@InjectQueue, the dashboard, the CLI).
   */
  claim(instance: string, kind: 'task' | 'queue', names: Iterable<string>): void {
    const owners = this.owners[kind];
    for (const name of names) {
      if (kind === 'queue' && name === DEFAULT_QUEUE) continue;
      const owner = owners.get(name);
      if (owner !== undefined && owner !== instance) throw new StampededConfigError(CLAIMED_BY_TWO_INSTANCES(kind, name, owner, instance));
      owners.set(name, instance);
    }
    if (kind === 'queue') this.refuseWorkedQueuesOfOthers();
  }

  /**
   * Refuses a worker.queues that names a queue another instance owns: that
   * queue's jobs are in the other database, so the workers would never run
   * one. Checked each time an instance claims, over every instance, so that
   * the last claim sees every owner whatever order Nest built them in.
   */
  private refuseWorkedQueuesOfOthers(): void {
    for (const { name, options } of this.instances.values()) {
      for (const queue of options.worker?.queues ?? []) {
        const owner = this.owners.queue.get(queue);
        if (owner !== undefined && owner !== name) throw new StampededConfigError(WORKED_QUEUE_OF_ANOTHER_INSTANCE(name, queue, owner));
      }
    }
  }

  /** The instance that handles the task of this name, if one does. */
  ownerOfTask(name: string): string | undefined {
    return this.owners.task.get(name);
  }
}

/** Holds the app's one StampededInstances, imported by every instance's module. */
@Global()
@Module({ providers: [StampededInstances], exports: [StampededInstances] })
export class StampededInstancesModule {}
