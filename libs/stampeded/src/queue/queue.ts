import type { EntityManager } from 'typeorm';
import type { QueueService, EnqueueManyItem, EnqueueManyItemOf } from './queue.service.js';
import type { EnqueueOptions, EnqueueResult } from '../interfaces/job-options.interface.js';
import type { QueueCounts } from '../interfaces/job.interface.js';
import type { ArgsOf, RegisteredTaskName, TaskClass, UnregisteredTaskName } from '../interfaces/task.interface.js';

/** A queue-bound handle, injected with @InjectQueue(name): every job it enqueues goes to its queue. */
export class Queue {
  constructor(
    readonly name: string,
    private readonly service: QueueService,
  ) {}

  /** QueueService.enqueue(), on this queue. */
  enqueue<T extends TaskClass>(task: T, args: ArgsOf<T>, options?: Omit<EnqueueOptions, 'queue'>): Promise<EnqueueResult>;
  enqueue<N extends RegisteredTaskName>(task: N, args: ArgsOf<N>, options?: Omit<EnqueueOptions, 'queue'>): Promise<EnqueueResult>;
  enqueue<Args extends object = Record<string, unknown>, N extends string = string>(
    task: UnregisteredTaskName<N>,
    args?: Args,
    options?: Omit<EnqueueOptions, 'queue'>,
  ): Promise<EnqueueResult>;
  enqueue(task: string | TaskClass, args?: object, options: Omit<EnqueueOptions, 'queue'> = {}): Promise<EnqueueResult> {
    // The overloads above checked the caller's types; these are passed on as they came.
    return this.service.enqueue(task as TaskClass, args as never, { ...options, queue: this.name });
  }

  /** QueueService.enqueueMany(), every job on this queue. */
  enqueueMany<const T extends readonly (TaskClass | string)[]>(
    jobs: readonly [...{ [K in keyof T]: EnqueueManyItemOf<T[K]> }],
    options?: { manager?: EntityManager },
  ): Promise<EnqueueResult[]>;
  enqueueMany(jobs: readonly EnqueueManyItem[], options: { manager?: EntityManager } = {}): Promise<EnqueueResult[]> {
    const onThisQueue = jobs.map((job) => ({ ...job, options: { ...job.options, queue: this.name } }));
    return this.service.enqueueMany(onThisQueue as never, options);
  }

  counts(): Promise<QueueCounts> {
    return this.service.counts(this.name);
  }
}
