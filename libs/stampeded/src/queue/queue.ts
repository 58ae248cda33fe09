import type { Type } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { QueueService, ArgsOf, EnqueueManyItem } from './queue.service.js';
import type { EnqueueOptions, EnqueueResult } from '../interfaces/job-options.interface.js';
import type { QueueCounts } from '../interfaces/job.interface.js';
import type { TaskHandler } from '../interfaces/task.interface.js';

/** A queue-bound handle, injected with @InjectQueue(name): every job it enqueues goes to its queue. */
export class Queue {
  constructor(
    readonly name: string,
    private readonly service: QueueService,
  ) {}

  enqueue<T extends Type<TaskHandler<any>>>(task: T, args: ArgsOf<T>, options?: Omit<EnqueueOptions, 'queue'>): Promise<EnqueueResult>;
  enqueue<Args extends object>(task: string, args?: Args, options?: Omit<EnqueueOptions, 'queue'>): Promise<EnqueueResult>;
  enqueue(task: any, args?: any, options: Omit<EnqueueOptions, 'queue'> = {}): Promise<EnqueueResult> {
    return this.service.enqueue(task, args, { ...options, queue: this.name });
  }

  enqueueMany(jobs: EnqueueManyItem[], options: { manager?: EntityManager } = {}): Promise<EnqueueResult[]> {
    return this.service.enqueueMany(
      jobs.map((job) => ({ ...job, options: { ...job.options, queue: this.name } })),
      options,
    );
  }

  counts(): Promise<QueueCounts> {
    return this.service.counts(this.name);
  }
}
