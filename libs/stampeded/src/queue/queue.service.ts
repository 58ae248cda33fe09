import { Inject, Injectable, Optional, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Observable } from 'rxjs';
import type { EntityManager } from 'typeorm';
import { JOB_COLUMN_DEFAULTS, STAMPEDED_OPTIONS } from '../stampeded.constants.js';
import type { JobColumnDefaults } from './job-column-defaults.js';
import { ENQUEUE_MANY_JOB_NOT_OBJECT, ENQUEUE_MANY_NOT_ARRAY, JOB_NOT_FOUND, MANAGER_PER_JOB } from '../stampeded.messages.js';
import { InvalidJobError } from '../errors/stampeded.errors.js';
import { StampededDatabase } from '../database/stampeded-database.js';
import { ReadDatabase } from '../database/read-database.js';
import { TaskRegistry } from '../explorer/task.registry.js';
import { JobEvents } from '../events/job-events.js';
import { JobWaiters } from '../events/job-waiters.js';
import { QueueRegistry } from './queue.registry.js';
import { rejectUnknown, validateJobId, type JobRow } from './job-input.validator.js';
import { DeadLetterRedriver } from './dead-letter-redriver.js';
import { JobRowBuilder } from './job-row.builder.js';
import { JobInserter } from './job.inserter.js';
import { JobReader, type FindJobCall, type GetJobOptions, type WaitForOptions } from './job.reader.js';
import { WorkflowService } from '../workflows/workflow.service.js';
import { JobEncryption } from '../encryption/job-encryption.js';
import { CANCEL, CANCEL_NOTIFY, RETRY } from '../sql/jobs.sql.js';
import { eventsChannel } from '../sql/notifications.sql.js';
import { JOB_TRACER } from '../tracing/tracing.provider.js';
import type { JobTracer } from '../tracing/job-tracer.js';
import type { Job, JobState, QueueCounts } from '../interfaces/job.interface.js';
import type { EnqueueOptions, EnqueueResult } from '../interfaces/job-options.interface.js';
import type { JobEvent } from '../interfaces/job-event.interface.js';
import type { ArgsOf, RegisteredTaskName, ResultOf, TaskClass, TypedTask, UnregisteredTaskName } from '../interfaces/task.interface.js';
import type { StampededModuleOptions } from '../interfaces/stampeded-options.interface.js';
import type { RedriveOptions, RedriveResult } from '../interfaces/redrive.interface.js';
import type {
  BatchDefinition,
  CancelWorkflowResult,
  EnqueueWorkflowOptions,
  EnqueueWorkflowResult,
  FlowNode,
  Workflow,
  WorkflowDefinition,
  WorkflowSummary,
} from '../interfaces/workflow.interface.js';

export type { FindJobOptions, GetJobOptions, WaitForOptions } from './job.reader.js';

/** One job of enqueueMany(), untyped: any task, args as JSON. */
export interface EnqueueManyItem<Args extends object = Record<string, unknown>> {
  task: string | TaskClass;
  args?: Args;
  options?: Omit<EnqueueOptions, 'manager'>;
}

/**
 * One job of enqueueMany() whose task is `T`: its args are checked as
 * enqueue()'s when the task is a @Task() class or a name StampededTasks
 * lists; any other name takes an EnqueueManyItem's.
 */
export type EnqueueManyItemOf<T> = [T] extends [TypedTask]
  ? { task: T; args: ArgsOf<T>; options?: Omit<EnqueueOptions, 'manager'> }
  : { task: T extends string ? UnregisteredTaskName<T> : T; args?: object; options?: Omit<EnqueueOptions, 'manager'> };

export interface CancelResult {
  id: string;
  /** True when this call cancelled the job; false when it had already finished. */
  cancelled: boolean;
  /** The state the job was in when the call found it. */
  previousState: JobState;
}

export interface RetryResult {
  id: string;
  /** True when the job is available to run now. */
  retried: boolean;
  previousState: JobState;
}

const ENQUEUE_MANY_ITEM = ['task', 'args', 'options'];

/**
 * Enqueue and inspect jobs. Injectable anywhere once StampededModule is
 * imported. A facade: JobRowBuilder builds the rows, JobInserter inserts
 * them, JobReader reads jobs back, WorkflowService has the workflows.
 */
@Injectable()
export class QueueService implements OnApplicationBootstrap, OnApplicationShutdown {
  // Made here rather than injected: a provider more in QueueService's
  // dependencies would move its bootstrap after the worker's, which Nest
  // orders by the depth of their dependencies.
  private readonly rows: JobRowBuilder;
  private readonly inserter: JobInserter;
  private readonly reader: JobReader;
  private readonly workflowService: WorkflowService;
  /** The app's waits (waitFor). */
  private readonly waiters: JobWaiters;

  constructor(
    private readonly db: StampededDatabase,
    private readonly tasks: TaskRegistry,
    private readonly queues: QueueRegistry,
    private readonly jobEvents: JobEvents,
    @Inject(STAMPEDED_OPTIONS) private readonly options: StampededModuleOptions,
    @Inject(JOB_COLUMN_DEFAULTS) columnDefaults: JobColumnDefaults,
    reads: ReadDatabase,
    @Optional() @Inject(JOB_TRACER) tracer: JobTracer | null = null,
  ) {
    const encryption = new JobEncryption(options, queues);
    this.rows = new JobRowBuilder(tasks, queues, options, columnDefaults, encryption);
    this.inserter = new JobInserter(db, tracer);
    this.waiters = new JobWaiters(db, jobEvents, encryption);
    this.reader = new JobReader(db, this.waiters, encryption, reads);
    this.workflowService = new WorkflowService(db, this.rows, this.inserter);
  }

  /** Ends the waits still pending: the app is closing, and will hear no more. */
  onApplicationShutdown(): void {
    this.waiters.shutdown();
  }

  /** The plain enqueues prepared on two connections, so that the first enqueues do not pay for it. */
  async onApplicationBootstrap(): Promise<void> {
    let row: JobRow;
    try {
      ({ row } = this.rows.row('warm-up', { task: 'stampeded.warm-up' }));
    } catch {
      return; // defaults no job could be enqueued with: the first enqueue() says what is wrong
    }
    await this.inserter.warm(row);
  }

  /**
   * Every job event this app sees: completed, failed, retrying, discarded,
   * cancelled, ... of its own workers' jobs and, with `events: 'fleet'`, of
   * every process's (see JobEvents).
   */
  get events$(): Observable<JobEvent> {
    return this.jobEvents.events$;
  }

  /**
   * Enqueues one job. With `manager`, the insert joins that transaction: a
   * rollback leaves no job. A duplicate of a pending job with the same dedup
   * scope returns that job's id with `deduplicated: true`.
   */
  async enqueue<T extends TaskClass>(task: T, args: ArgsOf<T>, options?: EnqueueOptions): Promise<EnqueueResult>;
  async enqueue<N extends RegisteredTaskName>(task: N, args: ArgsOf<N>, options?: EnqueueOptions): Promise<EnqueueResult>;
  async enqueue<Args extends object = Record<string, unknown>, N extends string = string>(
    task: UnregisteredTaskName<N>,
    args?: Args,
    options?: EnqueueOptions,
  ): Promise<EnqueueResult>;
  async enqueue(task: string | TaskClass, args?: object, options: EnqueueOptions = {}): Promise<EnqueueResult> {
    const rows = await this.rows.build([{ task, args, options }], () => 'enqueue()');
    const [result] = await this.inserter.insert(rows, false, options?.manager);
    return result;
  }

  /**
   * Enqueues many jobs in one statement; answers per job, in order, as
   * enqueue() would. Each job's args are checked against its task's type, as
   * enqueue() checks them.
   */
  async enqueueMany<const T extends readonly (TaskClass | string)[]>(
    jobs: readonly [...{ [K in keyof T]: EnqueueManyItemOf<T[K]> }],
    options?: { manager?: EntityManager },
  ): Promise<EnqueueResult[]>;
  async enqueueMany(jobs: readonly EnqueueManyItem[], options: { manager?: EntityManager } = {}): Promise<EnqueueResult[]> {
    if (!Array.isArray(jobs)) throw new InvalidJobError(ENQUEUE_MANY_NOT_ARRAY(jobs));
    const where = (i: number) => `enqueueMany() job #${i}`;
    jobs.forEach((job, i) => {
      if (job === null || typeof job !== 'object') throw new InvalidJobError(ENQUEUE_MANY_JOB_NOT_OBJECT(where(i)));
      rejectUnknown(where(i), job, ENQUEUE_MANY_ITEM);
      if (job.options && 'manager' in job.options) throw new InvalidJobError(MANAGER_PER_JOB(where(i), 'enqueueMany(jobs, { manager })'));
    });
    const rows = await this.rows.build(jobs, where);
    if (rows.length === 0) return [];
    return this.inserter.insert(rows, true, options.manager);
  }

  /**
   * The job with this id, or null. Given its task first (a @Task() class or
   * a name StampededTasks lists), the job is typed by the task's args and
   * result, and a job of another task is not returned. Or typed by hand:
   * `getJob<{ to: string }, { messageId: string }>(id)`. With `{ logs: true }`,
   * the lines its handler wrote with ctx.log() come as `logs`. With
   * `{ replica: true }` it is read from the replica (`readConnection`), for
   * display: it may not show this app's latest writes yet.
   */
  async getJob<T extends TypedTask>(task: T, id: string, options?: GetJobOptions): Promise<Job<ArgsOf<T>, ResultOf<T>> | null>;
  async getJob<Args extends object = Record<string, unknown>, Result = unknown, N extends string = string>(
    task: UnregisteredTaskName<N>,
    id: string,
    options?: GetJobOptions,
  ): Promise<Job<Args, Result> | null>;
  async getJob<Args extends object = Record<string, unknown>, Result = unknown>(id: string, options?: GetJobOptions): Promise<Job<Args, Result> | null>;
  async getJob(...call: FindJobCall<GetJobOptions>): Promise<Job | null> {
    return this.reader.getJob(call);
  }

  /**
   * Waits for the job to finish and resolves with it, as getJob() returns
   * it: completed (with its stored result), discarded (its error history) or
   * cancelled. A job that failed and will be retried has not finished: the
   * wait goes on through its retries. A job finished already resolves at
   * once. Works in any process of the fleet, whichever process runs the job:
   * the app's one LISTEN connection hears the outcome (docs/tasks.md,
   * Waiting for a job), and all its waits are re-read in one statement every
   * few seconds for what no notification said.
   *
   * Rejects with a JobWaitError after `timeoutMs`, or when the job is no
   * longer stored (removed on completion, pruned) or the app shuts down; with
   * `signal.reason` when `signal` aborts; and with an InvalidJobError when no
   * such job exists. Only the wait ends: the job is not cancelled.
   */
  async waitFor<T extends TypedTask>(task: T, id: string, options?: WaitForOptions): Promise<Job<ArgsOf<T>, ResultOf<T>>>;
  async waitFor<Args extends object = Record<string, unknown>, Result = unknown, N extends string = string>(
    task: UnregisteredTaskName<N>,
    id: string,
    options?: WaitForOptions,
  ): Promise<Job<Args, Result>>;
  async waitFor<Args extends object = Record<string, unknown>, Result = unknown>(id: string, options?: WaitForOptions): Promise<Job<Args, Result>>;
  async waitFor(...call: FindJobCall<WaitForOptions>): Promise<Job> {
    return this.reader.waitFor(call);
  }

  /**
   * Cancels a job that has not finished. Once this returns, no worker can
   * record an outcome for it, and a running handler's signal fires.
   */
  async cancel(id: string, options: { queue?: string } = {}): Promise<CancelResult> {
    validateJobId('cancel()', id);
    const [row] = this.jobEvents.fleetWide
      ? await this.db.query<{ was: JobState; now_state: JobState }>(CANCEL_NOTIFY, [id, options.queue ?? null, eventsChannel(this.db.schema)])
      : await this.db.query<{ was: JobState; now_state: JobState }>(CANCEL, [id, options.queue ?? null]);
    if (!row) throw new InvalidJobError(JOB_NOT_FOUND(id));
    return { id, cancelled: row.now_state === 'cancelled' && row.was !== 'cancelled', previousState: row.was };
  }

  /** Runs a discarded or cancelled job again with a fresh attempt budget, or a waiting one now. */
  async retry(id: string, options: { queue?: string } = {}): Promise<RetryResult> {
    validateJobId('retry()', id);
    const [row] = await this.db.query<{ was: JobState; now_state: JobState }>(RETRY, [id, options.queue ?? null]);
    if (!row) throw new InvalidJobError(JOB_NOT_FOUND(id));
    return { id, retried: row.now_state === 'available', previousState: row.was };
  }

  /**
   * Puts a dead-letter queue's copies back on their source queues as fresh
   * jobs, optionally only one task's or one error fingerprint's, in batches
   * (onProgress after each). Answers what moved per source queue and task;
   * with `dryRun`, what would move, and moves nothing. Safe to run twice, or
   * twice at once: each copy moves once. Bad input is refused before
   * anything is written. The same as `stampeded dlq redrive` and the
   * dashboard's redrive.
   */
  async redrive(deadLetterQueue: string, options: RedriveOptions = {}): Promise<RedriveResult> {
    // A dead-letter queue this app declares is empty, not misspelt, until the first job fails into it.
    const declared = [
      this.options.defaultJobOptions?.deadLetterQueue,
      ...this.queues.names().flatMap((q) => [q, this.queues.get(q)?.defaultJobOptions?.deadLetterQueue]),
      ...this.tasks.all().map((t) => t.metadata.deadLetterQueue),
    ].filter((q): q is string => typeof q === 'string');
    return new DeadLetterRedriver(this.db).redrive(deadLetterQueue, options, { where: 'redrive()', declaredQueues: declared });
  }

  /**
   * Enqueues a workflow in one statement and one transaction: jobs that each
   * name the jobs of the same workflow they wait for (`dependsOn`), a DAG. A
   * job runs once every job it waits for completed. When one of them is
   * discarded or cancelled, the waiting job is cancelled, with the reason in
   * its last_error, unless that dependency has `ignoreFailure: true`; then it
   * runs anyway, and ctx.dependencies() tells it what happened. A cycle, an
   * unknown or repeated dependency or a repeated name is refused before
   * anything is written. With `manager`, the workflow joins that
   * transaction.
   */
  async enqueueWorkflow(definition: WorkflowDefinition, options: EnqueueWorkflowOptions = {}): Promise<EnqueueWorkflowResult> {
    return this.workflowService.enqueueWorkflow(definition, options);
  }

  /**
   * Enqueues a BullMQ-style flow: a parent job that runs after its children
   * (and they after theirs), reading their results with ctx.childResults().
   * A workflow underneath: its id works with getWorkflow() and
   * cancelWorkflow(). The root's name (default "0") is the workflow's name
   * unless `name` is given.
   */
  async enqueueFlow(root: FlowNode, options: EnqueueWorkflowOptions & { name?: string } = {}): Promise<EnqueueWorkflowResult> {
    return this.workflowService.enqueueFlow(root, options);
  }

  /**
   * Enqueues a batch: jobs that run independently, and a callback job that
   * runs once, when every one of them has finished, whatever the outcome;
   * ctx.batch() gives it how many completed, were discarded or cancelled.
   * Exactly once however many processes finish the last jobs at the same
   * moment (see stampeded_workflow_advance).
   */
  async enqueueBatch(definition: BatchDefinition, options: EnqueueWorkflowOptions = {}): Promise<EnqueueWorkflowResult> {
    return this.workflowService.enqueueBatch(definition, options);
  }

  /** A workflow (or batch) with each of its jobs' state and dependencies, or null. */
  async getWorkflow(id: string): Promise<Workflow | null> {
    return this.workflowService.get(id);
  }

  /** Workflows and batches, newest first, with their jobs counted by state. */
  async workflows(options: { limit?: number; before?: string; name?: string } = {}): Promise<WorkflowSummary[]> {
    return this.workflowService.list(options);
  }

  /**
   * Cancels every job of a workflow that has not finished, in one
   * statement; running ones see their signal fire, and no worker can record
   * an outcome for them once this returns.
   */
  async cancelWorkflow(id: string, options: { reason?: string } = {}): Promise<CancelWorkflowResult> {
    return this.workflowService.cancel(id, options);
  }

  /** Jobs per state, from the trigger-maintained counters (never count(*)). */
  async counts(queue: string): Promise<QueueCounts>;
  async counts(): Promise<Record<string, QueueCounts>>;
  async counts(queue?: string): Promise<QueueCounts | Record<string, QueueCounts>> {
    return this.reader.counts(queue);
  }
}
