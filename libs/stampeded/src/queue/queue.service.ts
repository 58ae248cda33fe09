import { Inject, Injectable, Optional, type OnApplicationBootstrap, type OnApplicationShutdown, type Type } from '@nestjs/common';
import type { Observable } from 'rxjs';
import type { EntityManager } from 'typeorm';
import { JOB_COLUMN_DEFAULTS, LIMITS, STAMPEDED_OPTIONS } from '../stampeded.constants.js';
import type { JobColumnDefaults } from './job-column-defaults.js';
import { INVALID_ARGS, INVALID_OPTION, JOB_NOT_FOUND, UNKNOWN_OPTIONS, WORKFLOW_EMPTY, WORKFLOW_NOT_FOUND } from '../stampeded.messages.js';
import { InvalidJobError } from '../errors/stampeded.errors.js';
import { StampededDatabase } from '../database/stampeded-database.js';
import { TaskRegistry, type ResolvedTask } from '../explorer/task.registry.js';
import { taskNameOf } from '../decorators/task-metadata.js';
import { JobEvents } from '../events/job-events.js';
import { JobWaiters } from '../events/job-waiters.js';
import { QueueRegistry } from './queue.registry.js';
import { buildJobRow, describe, rejectUnknown, validateQueueName, validateTaskName, type JobRow } from './job-input.validator.js';
import { toJob } from './job.mapper.js';
import { DeadLetterRedriver } from './dead-letter-redriver.js';
import {
  CANCEL,
  CANCEL_NOTIFY,
  ENQUEUE,
  ENQUEUE_KEYED,
  ENQUEUE_ONE,
  ENQUEUE_ONE_KEYS,
  ENQUEUE_PLAIN,
  ENQUEUE_PLAIN_KEYED,
  GET_JOB,
  RETRY,
} from '../sql/jobs.sql.js';
import { UuidV7Source } from './uuidv7.js';
import { COUNTS } from '../sql/queues.sql.js';
import { eventsChannel } from '../sql/notifications.sql.js';
import { JOB_TRACER } from '../tracing/tracing.provider.js';
import type { JobTracer } from '../tracing/job-tracer.js';
import { JOB_STATES, type Job, type JobState, type QueueCounts } from '../interfaces/job.interface.js';
import type { EnqueueOptions, EnqueueResult } from '../interfaces/job-options.interface.js';
import type { JobEvent } from '../interfaces/job-event.interface.js';
import type { ArgsOf, RegisteredTaskName, ResultOf, TaskClass, TaskHandler, TypedTask, UnregisteredTaskName } from '../interfaces/task.interface.js';
import type { StampededModuleOptions } from '../interfaces/stampeded-options.interface.js';
import { arrayElement, type Statement } from '../sql/statement.js';
import type { RedriveOptions, RedriveResult } from '../interfaces/redrive.interface.js';
import type {
  BatchDefinition,
  CancelWorkflowResult,
  EnqueueWorkflowOptions,
  EnqueueWorkflowResult,
  FlowNode,
  Workflow,
  WorkflowDefinition,
  WorkflowJob,
  WorkflowSummary,
} from '../interfaces/workflow.interface.js';
import { CANCEL_WORKFLOW, ENQUEUE_WORKFLOW, GET_WORKFLOW, LIST_WORKFLOWS, WORKFLOW_JOBS } from '../sql/workflows.sql.js';
import { flowToWorkflow, planWorkflow, type WorkflowEdge } from './workflow-graph.js';
import { toWorkflow, toWorkflowSummary } from './workflow.mapper.js';

/** One job of enqueueMany(), untyped: any task, args as JSON. */
export interface EnqueueManyItem<Args extends object = Record<string, unknown>> {
  task: string | Type<TaskHandler<any>>;
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

/** Where a getJob() or the like looks for the job. */
export interface FindJobOptions {
  /** Only in this queue (its partition alone is read). */
  queue?: string;
}

export interface WaitForOptions extends FindJobOptions {
  /** Give up after this long, with a JobWaitError (the job goes on). Default: no limit. */
  timeoutMs?: number;
  /** Give up when it aborts, with its reason (the job goes on). */
  signal?: AbortSignal;
}

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

/** The arguments of getJob() and the like: (task, id, options?) or (id, options?). */
type FindJobCall<O = FindJobOptions> = [task: string | TaskClass, id: string, options?: O] | [id: string, options?: O];

const WAIT_FOR_OPTIONS = ['queue', 'timeoutMs', 'signal'];

/** A duplicate racing a concurrent insert of its twin is asked again, this many times. */
const DEDUP_RACE_RETRIES = 5;

/** Enqueue and inspect jobs. Injectable anywhere once StampededModule is imported. */
@Injectable()
export class QueueService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly ids = new UuidV7Source();
  /**
   * The app's waits (waitFor), made here rather than injected: a provider
   * more in QueueService's dependencies would move its bootstrap after the
   * worker's, which Nest orders by the depth of their dependencies.
   */
  private readonly waiters: JobWaiters;

  constructor(
    private readonly db: StampededDatabase,
    private readonly tasks: TaskRegistry,
    private readonly queues: QueueRegistry,
    private readonly jobEvents: JobEvents,
    @Inject(STAMPEDED_OPTIONS) private readonly options: StampededModuleOptions,
    @Inject(JOB_COLUMN_DEFAULTS) private readonly columnDefaults: JobColumnDefaults,
    @Optional() @Inject(JOB_TRACER) private readonly tracer: JobTracer | null = null,
  ) {
    this.waiters = new JobWaiters(db, jobEvents);
  }

  /** Ends the waits still pending: the app is closing, and will hear no more. */
  onApplicationShutdown(): void {
    this.waiters.shutdown();
  }

  /** The plain enqueues prepared on two connections, so that the first enqueues do not pay for it. */
  async onApplicationBootstrap(): Promise<void> {
    // Rolled back by warm(): the row enqueue() warms with is never seen.
    let row: JobRow;
    try {
      row = this.toRow('warm-up', 'stampeded.warm-up', {}, {}).row;
    } catch {
      return; // defaults no job could be enqueued with: the first enqueue() says what is wrong
    }
    await this.db.warm([
      { statement: ENQUEUE_PLAIN, values: ['[]', '{}'] },
      { statement: ENQUEUE_ONE, values: [this.ids.many(1)[0], ...ENQUEUE_ONE_KEYS.map((key) => row[key])] },
    ]);
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
    const job = this.toRow('enqueue()', task, args, options);
    const invalid = this.checkArgs('enqueue()', job);
    if (invalid) await invalid;
    const [result] = await this.send([job.row], false, options.manager);
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
    if (!Array.isArray(jobs)) throw new InvalidJobError(`enqueueMany() takes an array of { task, args?, options? }, got ${typeof jobs}.`);
    const checks: Promise<void>[] = [];
    const rows = jobs.map((job, i) => {
      const where = `enqueueMany() job #${i}`;
      if (job === null || typeof job !== 'object') throw new InvalidJobError(`${where}: must be an object { task, args?, options? }.`);
      const unknown = Object.keys(job).filter((k) => !['task', 'args', 'options'].includes(k));
      if (unknown.length) throw new InvalidJobError(UNKNOWN_OPTIONS(where, unknown, ['task', 'args', 'options']));
      if (job.options && 'manager' in job.options) {
        throw new InvalidJobError(`${where}: pass manager once, as enqueueMany(jobs, { manager }), not per job.`);
      }
      const resolved = this.toRow(where, job.task, job.args, job.options ?? {});
      const invalid = this.checkArgs(where, resolved);
      if (invalid) checks.push(invalid);
      return resolved.row;
    });
    // Every job's check settles before the first refusal is thrown, so that none runs on after the call returns.
    if (checks.length) {
      const refused = (await Promise.allSettled(checks)).find((check) => check.status === 'rejected');
      if (refused) throw refused.reason;
    }
    if (rows.length === 0) return [];
    return this.send(rows, true, options.manager);
  }

  /**
   * The job with this id, or null. Given its task first (a @Task() class or
   * a name StampededTasks lists), the job is typed by the task's args and
   * result, and a job of another task is not returned. Or typed by hand:
   * `getJob<{ to: string }, { messageId: string }>(id)`.
   */
  async getJob<T extends TypedTask>(task: T, id: string, options?: FindJobOptions): Promise<Job<ArgsOf<T>, ResultOf<T>> | null>;
  async getJob<Args extends object = Record<string, unknown>, Result = unknown, N extends string = string>(
    task: UnregisteredTaskName<N>,
    id: string,
    options?: FindJobOptions,
  ): Promise<Job<Args, Result> | null>;
  async getJob<Args extends object = Record<string, unknown>, Result = unknown>(id: string, options?: FindJobOptions): Promise<Job<Args, Result> | null>;
  async getJob(...call: FindJobCall): Promise<Job | null> {
    const { task, id, options } = this.findJobCall('getJob()', call);
    this.assertUuid('getJob()', id);
    const [row] = await this.db.query(GET_JOB, [id, options.queue ?? null]);
    if (!row || (task !== undefined && row.task !== task)) return null;
    return toJob(row);
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
    const where = 'waitFor()';
    const { task, id, options } = this.findJobCall(where, call, '{ queue?, timeoutMs?, signal? }');
    this.assertUuid(where, id);
    const { queue, timeoutMs, signal } = options as WaitForOptions;
    const unknown = Object.keys(options).filter((k) => !WAIT_FOR_OPTIONS.includes(k));
    if (unknown.length) throw new InvalidJobError(UNKNOWN_OPTIONS(where, unknown, WAIT_FOR_OPTIONS));
    if (queue !== undefined) validateQueueName(where, 'queue', queue);
    if (timeoutMs !== undefined && (!Number.isInteger(timeoutMs) || timeoutMs < 0 || timeoutMs > LIMITS.integer.max)) {
      throw new InvalidJobError(INVALID_OPTION(where, 'timeoutMs', `must be a whole number of milliseconds from 0 to ${LIMITS.integer.max}, got ${timeoutMs}`));
    }
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new InvalidJobError(
        INVALID_OPTION(where, 'signal', `must be an AbortSignal (from an AbortController, or AbortSignal.timeout()), got ${typeof signal}`),
      );
    }
    return this.waiters.wait({ id, queue, task, timeoutMs, signal });
  }

  /**
   * Cancels a job that has not finished. Once this returns, no worker can
   * record an outcome for it, and a running handler's signal fires.
   */
  async cancel(id: string, options: { queue?: string } = {}): Promise<CancelResult> {
    this.assertUuid('cancel()', id);
    const [row] = this.jobEvents.fleetWide
      ? await this.db.query<{ was: JobState; now_state: JobState }>(CANCEL_NOTIFY, [id, options.queue ?? null, eventsChannel(this.db.schema)])
      : await this.db.query<{ was: JobState; now_state: JobState }>(CANCEL, [id, options.queue ?? null]);
    if (!row) throw new InvalidJobError(JOB_NOT_FOUND(id));
    return { id, cancelled: row.now_state === 'cancelled' && row.was !== 'cancelled', previousState: row.was };
  }

  /** Runs a discarded or cancelled job again with a fresh attempt budget, or a waiting one now. */
  async retry(id: string, options: { queue?: string } = {}): Promise<RetryResult> {
    this.assertUuid('retry()', id);
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
    const where = 'enqueueWorkflow()';
    if (definition === null || typeof definition !== 'object') throw new InvalidJobError(`${where} takes { name, jobs }, got ${typeof definition}.`);
    rejectUnknown(where, definition, ['name', 'jobs']);
    return this.insertWorkflow(where, 'workflow', definition.name, definition.jobs, options);
  }

  /**
   * Enqueues a BullMQ-style flow: a parent job that runs after its children
   * (and they after theirs), reading their results with ctx.childResults().
   * A workflow underneath: its id works with getWorkflow() and
   * cancelWorkflow(). The root's name (default "0") is the workflow's name
   * unless `name` is given.
   */
  async enqueueFlow(root: FlowNode, options: EnqueueWorkflowOptions & { name?: string } = {}): Promise<EnqueueWorkflowResult> {
    const where = 'enqueueFlow()';
    const { name, ...rest } = options ?? {};
    const jobs = flowToWorkflow(where, root);
    const rootJob = jobs[jobs.length - 1];
    const taskName = taskNameOf(rootJob.task);
    return this.insertWorkflow(where, 'workflow', name ?? `${taskName}`, jobs, rest);
  }

  /**
   * Enqueues a batch: jobs that run independently, and a callback job that
   * runs once, when every one of them has finished, whatever the outcome;
   * ctx.batch() gives it how many completed, were discarded or cancelled.
   * Exactly once however many processes finish the last jobs at the same
   * moment (see stampeded_workflow_advance).
   */
  async enqueueBatch(definition: BatchDefinition, options: EnqueueWorkflowOptions = {}): Promise<EnqueueWorkflowResult> {
    const where = 'enqueueBatch()';
    if (definition === null || typeof definition !== 'object') throw new InvalidJobError(`${where} takes { name, jobs, callback }, got ${typeof definition}.`);
    rejectUnknown(where, definition, ['name', 'jobs', 'callback']);
    if (!Array.isArray(definition.jobs) || definition.jobs.length === 0) throw new InvalidJobError(WORKFLOW_EMPTY(where));
    if (definition.callback === null || typeof definition.callback !== 'object') {
      throw new InvalidJobError(`${where}: callback must be a job { task, args?, options?, name? } that runs when the batch has finished.`);
    }
    const members = definition.jobs.map((job, i) => {
      if (job !== null && typeof job === 'object' && 'dependsOn' in job) {
        throw new InvalidJobError(`${where}: job #${i} has dependsOn; a batch's jobs run independently. Use enqueueWorkflow() for dependencies.`);
      }
      return job;
    });
    const callbackName = definition.callback.name ?? 'callback';
    const callback: WorkflowJob = {
      ...definition.callback,
      name: callbackName,
      dependsOn: members.map((job) => ({ name: job.name, ignoreFailure: true })),
    };
    return this.insertWorkflow(where, 'batch', definition.name, [...members, callback], options);
  }

  /** A workflow (or batch) with each of its jobs' state and dependencies, or null. */
  async getWorkflow(id: string): Promise<Workflow | null> {
    this.assertUuid('getWorkflow()', id);
    const [row] = await this.db.query(GET_WORKFLOW, [id]);
    if (!row) return null;
    const jobs = await this.db.query(WORKFLOW_JOBS, [id]);
    return toWorkflow(row, jobs);
  }

  /** Workflows and batches, newest first, with their jobs counted by state. */
  async workflows(options: { limit?: number; before?: string; name?: string } = {}): Promise<WorkflowSummary[]> {
    const where = 'workflows()';
    rejectUnknown(where, options, ['limit', 'before', 'name']);
    const limit = options.limit ?? 50;
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
      throw new InvalidJobError(INVALID_OPTION(where, 'limit', `must be an integer from 1 to 1000, got ${limit}`));
    if (options.before !== undefined) this.assertUuid(where, options.before);
    const rows = await this.db.query(LIST_WORKFLOWS, [limit, options.before ?? null, options.name ?? null]);
    return rows.map(toWorkflowSummary);
  }

  /**
   * Cancels every job of a workflow that has not finished, in one
   * statement; running ones see their signal fire, and no worker can record
   * an outcome for them once this returns.
   */
  async cancelWorkflow(id: string, options: { reason?: string } = {}): Promise<CancelWorkflowResult> {
    this.assertUuid('cancelWorkflow()', id);
    const [found] = await this.db.query(GET_WORKFLOW, [id]);
    if (!found) throw new InvalidJobError(WORKFLOW_NOT_FOUND(id));
    const [row] = await this.db.query<{ cancelled: number }>(CANCEL_WORKFLOW, [id, options.reason ?? null]);
    return { id, cancelled: row.cancelled };
  }

  private async insertWorkflow(
    where: string,
    kind: 'workflow' | 'batch',
    name: unknown,
    jobs: readonly WorkflowJob[],
    options: EnqueueWorkflowOptions,
  ): Promise<EnqueueWorkflowResult> {
    if (typeof name !== 'string' || name.length === 0 || name.length > 200) {
      throw new InvalidJobError(INVALID_OPTION(where, 'name', `must be a non-empty string of 200 characters or fewer, got ${describe(name)}`));
    }
    if (options === null || typeof options !== 'object') throw new InvalidJobError(`${where}: options must be an object { manager? }.`);
    rejectUnknown(where, options, ['manager']);
    const graph = planWorkflow(where, jobs);
    const checks: Promise<void>[] = [];
    const rows = jobs.map((job, i) => {
      const at = `${where} job ${JSON.stringify(graph.names[i])}`;
      rejectUnknown(at, job, ['name', 'task', 'args', 'options', 'dependsOn']);
      if (job.options && ('manager' in job.options || 'dedup' in job.options || 'orderingKey' in job.options)) {
        const problem =
          'manager' in job.options
            ? 'pass manager once, for the whole call'
            : 'dedup' in job.options
              ? 'a workflow job takes no dedup: the workflow is enqueued whole or not at all'
              : "a workflow job takes no orderingKey: dependsOn orders the workflow, and a waiting job ahead in a key's line would hold the key";
        throw new InvalidJobError(`${at}: ${problem}.`);
      }
      const resolved = this.toRow(at, job.task, job.args, job.options ?? {});
      const invalid = this.checkArgs(at, resolved);
      if (invalid) checks.push(invalid);
      return resolved.row;
    });
    if (checks.length) {
      const refused = (await Promise.allSettled(checks)).find((check) => check.status === 'rejected');
      if (refused) throw refused.reason;
    }
    const [workflowId] = this.ids.many(1);
    const ids = this.ids.many(rows.length);
    const extra = graph.names.map((step, i) => `"step":${JSON.stringify(step)},"deps_pending":${graph.waitsFor[i]}`);
    // The edges as five array literals of one element an edge (ENQUEUE_WORKFLOW's $6-$10), each queue quoted once.
    const quoted = new Map<string, string>();
    const queueOf = (i: number) => {
      let q = quoted.get(rows[i].queue);
      if (q === undefined) quoted.set(rows[i].queue, (q = arrayElement(rows[i].queue)));
      return q;
    };
    const edges = graph.edges;
    const literal = (element: (e: WorkflowEdge) => string) => `{${edges.map(element).join(',')}}`;
    const values = [
      ...rowsToJson(rows, ids, extra),
      workflowId,
      name,
      kind,
      literal((e) => queueOf(e.from)),
      literal((e) => ids[e.from]),
      literal((e) => queueOf(e.to)),
      literal((e) => ids[e.to]),
      literal((e) => (e.ignoreFailure ? 't' : 'f')),
    ];
    if (options.manager) {
      const bound = this.db.statement(ENQUEUE_WORKFLOW);
      await options.manager.query(bound.text, values);
    } else {
      await this.db.query(ENQUEUE_WORKFLOW, values);
    }
    return { id: workflowId, jobs: Object.fromEntries(graph.names.map((step, i) => [step, ids[i]])) };
  }

  /** Jobs per state, from the trigger-maintained counters (never count(*)). */
  async counts(queue: string): Promise<QueueCounts>;
  async counts(): Promise<Record<string, QueueCounts>>;
  async counts(queue?: string): Promise<QueueCounts | Record<string, QueueCounts>> {
    const rows = await this.db.query<{ queue: string; state: JobState; n: string }>(COUNTS, [queue ?? null]);
    const byQueue: Record<string, QueueCounts> = {};
    for (const { queue: q, state, n } of rows) (byQueue[q] ??= emptyCounts())[state] = Number(n);
    return queue === undefined ? byQueue : (byQueue[queue] ?? emptyCounts());
  }

  /** The job's row, its task resolved once for its defaults and for the check of its args (checkArgs). */
  private toRow(where: string, task: string | TaskClass, args: unknown, options: EnqueueOptions): { row: JobRow; task: ResolvedTask } {
    if (options === null || typeof options !== 'object') throw new InvalidJobError(`${where}: options must be an object.`);
    const resolved = this.tasks.resolve(task);
    const queueName = options.queue ?? resolved.defaults.queue;
    const queueDefaults = queueName ? (this.queues.get(queueName)?.defaultJobOptions ?? {}) : {};
    const layers = [this.options.defaultJobOptions ?? {}, queueDefaults, resolved.defaults];
    return { row: buildJobRow(where, resolved.name, args, options, layers, this.columnDefaults), task: resolved };
  }

  /** Inserts, in a producer span when tracing is on: one span per enqueue() or enqueueMany() call. */
  private send(rows: JobRow[], batch: boolean, manager?: EntityManager): Promise<EnqueueResult[]> {
    if (!this.tracer) return this.insert(rows, manager);
    return this.tracer.enqueue(rows, batch, (traced) => this.insert(traced, manager));
  }

  private async insert(rows: JobRow[], manager?: EntityManager): Promise<EnqueueResult[]> {
    const send = async (statement: Statement, values: unknown[]) => {
      if (!manager) return this.db.query<{ ord: number; id: string | null; deduplicated: boolean }>(statement, values);
      const bound = this.db.statement(statement);
      return (await manager.query(bound.text, values)) as { ord: number; id: string | null; deduplicated: boolean }[];
    };
    const run = (statement: Statement, values: unknown[]) =>
      send(statement, values).catch((err: unknown) => {
        // jsonb can be larger than the JSON text the validator measured (each
        // number is stored as a numeric with a header): args under the cap as
        // text can go over the schema's CHECK, a bare constraint error.
        const constraint = (err as { code?: string; constraint?: string }).code === '23514' ? (err as { constraint?: string }).constraint : undefined;
        if (constraint === 'stampeded_jobs_args_check' || constraint === 'stampeded_jobs_meta_check') {
          const field = constraint === 'stampeded_jobs_args_check' ? 'args' : 'meta';
          throw new InvalidJobError(
            `enqueue: a job's ${field} is over the 1048576-byte limit as PostgreSQL stores it (jsonb), though under it as JSON text; ` +
              `store large payloads elsewhere and pass a reference. Nothing was inserted.`,
          );
        }
        throw err;
      });
    // A batch with an ordering key reads its keys' lines to choose each job's state (migration 14); one without reads none.
    const keyed = rows.some((row) => row.ordering_key !== null);
    if (!rows.some((row) => row.dedup_scope !== null)) {
      // Nothing can conflict: every row is inserted under the id drawn here, or none is.
      const ids = this.ids.many(rows.length);
      if (keyed) await run(ENQUEUE_PLAIN_KEYED, rowsToJson(rows, ids));
      else if (rows.length === 1) await run(ENQUEUE_ONE, [ids[0], ...ENQUEUE_ONE_KEYS.map((key) => rows[0][key])]);
      else await run(ENQUEUE_PLAIN, rowsToJson(rows, ids));
      return ids.map((id) => ({ id, deduplicated: false }));
    }
    const results: EnqueueResult[] = new Array(rows.length);
    let pending = rows.map((row, index) => ({ row, index }));
    for (let round = 0; pending.length && round <= DEDUP_RACE_RETRIES; round++) {
      // Ids drawn here as for the plain enqueue: a job inserted takes its row's, a duplicate its twin's.
      const answer = await run(
        keyed ? ENQUEUE_KEYED : ENQUEUE,
        rowsToJson(
          pending.map((p) => p.row),
          this.ids.many(pending.length),
        ),
      );
      const unresolved: typeof pending = [];
      for (const { ord, id, deduplicated } of answer) {
        const item = pending[ord - 1];
        if (id === null) unresolved.push(item);
        else results[item.index] = { id, deduplicated };
      }
      pending = unresolved;
    }
    if (pending.length) {
      throw new Error(`enqueue: a duplicate's twin kept changing state under it (${pending.length} job(s)); nothing was inserted for them. Try again.`);
    }
    return results;
  }

  /**
   * The task's validate option on the row's args, for a task that has one:
   * throws at once when a synchronous check refuses them, or returns a
   * promise that rejects when an asynchronous one does. Undefined when there
   * is nothing to wait for. It checks the args as the row stores them, as
   * JSON, which is what the worker checks again and the handler receives:
   * a Date is a string by then, and a key whose value is undefined is gone.
   */
  private checkArgs(where: string, { row, task }: { row: JobRow; task: ResolvedTask }): Promise<void> | undefined {
    const validator = task.argsValidator;
    if (!validator) return undefined;
    const refuse = (issues: string[]) => {
      if (issues.length) throw new InvalidJobError(INVALID_ARGS(where, row.task, issues));
    };
    const issues = validator.issues(JSON.parse(row.args));
    if (!Array.isArray(issues)) return issues.then(refuse);
    refuse(issues);
    return undefined;
  }

  /** A call of the form (task, id, options?) or (id, options?), the task as its name. */
  private findJobCall(where: string, call: FindJobCall<object>, shape = '{ queue? }'): { task?: string; id: string; options: FindJobOptions } {
    const [first, second, third] = call as unknown[];
    const byTask = typeof first === 'function' || typeof second === 'string';
    const options = (byTask ? third : second) ?? {};
    if (options === null || typeof options !== 'object') throw new InvalidJobError(`${where}: options must be an object ${shape}.`);
    if (!byTask) return { id: first as string, options };
    const task = typeof first === 'function' ? taskNameOf(first as TaskClass) : validateTaskName(where, 'task', first);
    return { task, id: second as string, options };
  }

  private assertUuid(where: string, id: unknown): void {
    if (typeof id !== 'string' || !/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id)) {
      throw new InvalidJobError(`${where}: ${JSON.stringify(id)} is not a job id (a UUID).`);
    }
  }
}

/** The columns of a JobRow, args and meta (JSON text) first. */
const ROW_KEYS = [
  'args',
  'meta',
  'queue',
  'task',
  'tenant_id',
  'priority',
  'destination',
  'run_at',
  'delay_ms',
  'expire_seconds',
  'max_attempts',
  'backoff_base_ms',
  'backoff_max_ms',
  'max_interruptions',
  'max_deferrals',
  'dedup_scope',
  'dedup_period',
  'dead_letter_queue',
  'remove_on_complete',
  'backoff_base_wide_ms',
  'ordering_key',
] as const satisfies readonly (keyof JobRow)[];
const JSON_KEYS: ReadonlySet<keyof JobRow> = new Set(['args', 'meta']);

/**
 * The enqueue statements' two parameters: every row's own values, and the
 * values all rows share, written once. A bulk enqueue of one task sends
 * {"args":...} per job and its queue, task and options once, so that the
 * database does not parse them again for every row (bench/RESULTS.md). A
 * NULL column is left out (json_to_recordset reads a missing key as NULL).
 * args and meta are already-validated JSON text: spliced in as JSON, not
 * serialised twice. With `ids`, each row carries its id first; with
 * `extra`, each row's members of a statement's own columns (JSON members).
 */
export function rowsToJson(rows: JobRow[], ids?: string[], extra?: string[]): [rows: string, shared: string] {
  const shared: (keyof JobRow)[] = [];
  const own: (keyof JobRow)[] = [];
  for (const key of ROW_KEYS) {
    const first = rows[0]?.[key];
    if (first === null || first === undefined) own.push(key);
    else if (rows.every((row) => row[key] === first)) shared.push(key);
    else own.push(key);
  }
  const member = (key: keyof JobRow, value: JobRow[keyof JobRow]) =>
    `"${key}":${JSON_KEYS.has(key) || typeof value !== 'string' ? value : JSON.stringify(value)}`;
  const parts = new Array<string>(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i];
    const members: string[] = ids ? [`"id":"${ids[i]}"`] : [];
    if (extra) members.push(extra[i]);
    for (const key of own) {
      const value = row[key];
      if (value !== null && value !== undefined) members.push(member(key, value));
    }
    parts[i] = `{${members.join(',')}}`;
  }
  return [`[${parts.join(',')}]`, `{${shared.map((key) => member(key, rows[0][key])).join(',')}}`];
}

function emptyCounts(): QueueCounts {
  return Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as QueueCounts;
}
