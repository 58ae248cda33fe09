import type { Type } from '@nestjs/common';
import type { JobOptions } from './job-options.interface.js';
import type { JobProgress } from './job.interface.js';
import type { BatchCounts, WorkflowDependencyJob } from './workflow.interface.js';
import type { TaskScheduleOptions } from './schedule.interface.js';
import type { RetryPolicy } from './retry-policy.interface.js';
import type { ArgsValidateHook, StandardSchemaV1 } from './validation.interface.js';
import type { ChunkContext, ChunkJob, ChunkOptions, ChunkTaskHandler } from './chunk.interface.js';

export interface TaskOptions extends JobOptions {
  /**
   * The instance (forRoot's `name`) whose database holds this task's jobs and
   * whose worker runs them. Default: the default instance.
   */
  instance?: string;
  /**
   * `'process'` runs each job in a child process of its own, so that a crash,
   * a leak or a hang takes down the child and not the worker. The job then
   * runs the function of `processFile`, without dependency injection.
   */
  isolation?: 'none' | 'process';
  /**
   * For isolation 'process', and required by it: a module whose default
   * export is `(args, ctx) => Promise<unknown>`, as a URL or an absolute
   * path: `new URL('./render-pdf.process.js', import.meta.url)`.
   */
  processFile?: string | URL;
  /**
   * Enqueue this task on a schedule: `{ cron: '0 3 * * *', timezone: 'Europe/Berlin' }`
   * or `{ every: '15m' }`. Upserted at bootstrap under `key` (default: the task name).
   */
  schedule?: TaskScheduleOptions;
  /**
   * When a failed job of this task runs again: a function `(failure) => decision`
   * or an object with `nextRetry(failure)`. `{ retry: true, delayMs }` runs it
   * again after `delayMs`; `{ retry: false }` gives up and discards it (and
   * dead-letters it, as spent attempts do). `maxAttempts` still bounds it.
   * Default: DEFAULT_RETRY_POLICY, exponential from `backoff` with jitter.
   */
  retryPolicy?: RetryPolicy | RetryPolicy['nextRetry'];
  /**
   * Whether what `handle()` returns is stored with the job, for `getJob()`,
   * the dashboard and the CLI to read. Default true. `false` for a result
   * too large for the job row (over 64 KB as JSON) or that should not sit
   * in the jobs table (personal data, secrets): the completion then stores
   * nothing, and the result reaches only this process's `completed` event.
   */
  storeResult?: boolean;
  /**
   * What is kept of the lines its handler writes with `ctx.log()`, per job
   * over all its attempts: the newest `maxLines` (default 100, at most
   * 10,000; the older are dropped, and counted), each cut to `maxLineBytes`
   * bytes of UTF-8 (default 2048, at most 65536).
   */
  logs?: { maxLines?: number; maxLineBytes?: number };
  /**
   * A check of each job's args: a Standard Schema object (a zod, valibot or
   * arktype schema, say) or a function `(args) => issues` (ArgsValidateHook).
   * Checked at enqueue, where invalid args are refused with an
   * InvalidJobError before anything is written, and in the worker before
   * `handle()` runs, where a job with invalid args (inserted by SQL, another
   * runtime or an older version) is discarded as `unrecoverable` with the
   * issues in its error history instead of being retried. Checks only: the
   * job keeps its args as given, without the schema's transforms or defaults.
   */
  validate?: ArgsValidateHook | StandardSchemaV1;
  /**
   * How this task's jobs keep their key's order (the orderingKey enqueue
   * option). `retryKeepsPlace` (default true): a job that fails and will be
   * retried stays at the front of its key's order, and the next job of the key
   * waits for it through its backoff. `false`: its retry goes to the back of
   * its key's order, behind every job of its key enqueued before it failed, and the
   * next job runs at once. Either way the key's jobs run one at a time. A
   * retry after a crash (the reaper, an expiry) keeps its place.
   */
  ordering?: { retryKeepsPlace?: boolean };
  /**
   * Store this task's args, and its results when it stores them, encrypted
   * with the current key of forRoot's `encryption` (AES-256-GCM, in this
   * process): the jobs table, its dead letters and its schedules then hold
   * an envelope that names the key, never the plaintext. The worker opens
   * them before `validate` and `handle()`. Not encrypted: meta, the dedup
   * scope, the ordering key, tenant, destination, progress, checkpoints and
   * error messages. docs/encryption.md.
   */
  encrypt?: boolean;
  /**
   * Runs this task's jobs many at once: the class implements
   * `handleChunk(jobs, ctx)` (ChunkTaskHandler) in place of `handle()`, and
   * each call gets up to `size` jobs, or fewer once `waitMs` has passed
   * since the first arrived. Each job keeps its own outcome, attempts and
   * result (docs/tasks.md, "Chunks").
   */
  chunk?: ChunkOptions;
}

export interface TaskMetadata extends TaskOptions {
  name: string;
}

export interface JobContext {
  readonly id: string;
  readonly queue: string;
  readonly task: string;
  /** 1 on the first run. */
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly tenantId: string | null;
  readonly destination: string | null;
  /** The ordering key the job runs under, one at a time with the other jobs of its key (the orderingKey enqueue option), or null. */
  readonly orderingKey: string | null;
  /** The job's whole meta object; this runtime's own context is under `nestjs`. */
  readonly meta: Readonly<Record<string, unknown>>;
  /** Fires when the job times out, is cancelled, is lost to the reaper, or the worker shuts down. */
  readonly signal: AbortSignal;
  /** The last checkpoint a previous run saved, or null. */
  readonly checkpoint: unknown;
  /** Says "still working": pushes the expiry deadline back by expireSeconds. Resolves false if the job is no longer ours. */
  touch(): Promise<boolean>;
  /** Saves state for a re-run to resume from (64 KB at most); also counts as a touch and resets the interruption budget. */
  saveCheckpoint(state: unknown): Promise<void>;
  /**
   * Reports how far the job has got: a finite number (a percentage, by
   * convention) or a plain JSON object of 1 KB at most (`{ done: 40, total:
   * 200 }`), stored with the job for `getJob()` and the dashboard. Written at
   * most once a second, the last value winning, and the last value of a run
   * before its outcome; a write counts as a touch. Resolves false, and writes
   * nothing, when the job is no longer this worker's (cancelled, timed out,
   * reaped), and the signal fires then too. Best effort: a write that fails
   * is logged and never fails the job.
   */
  progress(value: JobProgress): Promise<boolean>;
  /**
   * Writes a line to the job's log, with the time and the attempt: read by
   * `getJob(id, { logs: true })`, on the dashboard's job page and by
   * `stampeded jobs show`. Returns at once: the lines are written in
   * batches, at most once a second, and a run's last lines before its
   * outcome. The newest lines of a job are kept (the task's `logs.maxLines`,
   * 100 by default; the older are dropped, and counted), each cut to
   * `logs.maxLineBytes` (2 KB by default). Nothing is written once the job
   * is no longer this worker's (cancelled, timed out, reaped). Best effort:
   * a write that fails is logged, and its lines go with the next.
   */
  log(message: string): void;
  /**
   * The jobs this job waited for in its workflow (enqueueWorkflow's
   * dependsOn, enqueueFlow's children, a batch's jobs), by name, each with
   * its state and its stored result. Rejects for a job outside a workflow.
   */
  dependencies<Result = unknown>(): Promise<WorkflowDependencyJob<Result>[]>;
  /**
   * The results of the jobs this job waited for, by their names in the
   * workflow: what a BullMQ parent reads with getChildrenValues(). A
   * dependency that did not complete, or returned nothing, is null. Typed by
   * hand (`ctx.childResults<{ total: number }>()`), or, given a @Task()
   * class or a name StampededTasks lists, by that task's result.
   */
  childResults<T extends TypedTask>(task: T): Promise<Record<string, ResultOf<T> | null>>;
  childResults<Result = unknown>(): Promise<Record<string, Result | null>>;
  /** For a batch's callback: how many of the batch's jobs completed, were discarded or cancelled. */
  batch(): Promise<BatchCounts>;
}

export interface TaskHandler<Args extends object = Record<string, unknown>, Result = unknown> {
  handle(args: Args, ctx: JobContext): Promise<Result> | Result;
}

/** A @Task() class: what enqueue(), getJob() and the other typed calls take in place of a task name. */
export type TaskClass<Args extends object = any, Result = any> = Type<TaskHandler<Args, Result>> | Type<ChunkTaskHandler<Args, Result>>;

/**
 * The tasks an app enqueues by name, by declaration merging, so that
 * `enqueue('send-email', args)` checks its args as `enqueue(SendEmail, args)`
 * does. Each entry is the task's args type, or its @Task() class's instance
 * type (which gives the result type too):
 *
 * @example
 * declare module '@stampeded/nestjs' {
 *   interface StampededTasks {
 *     'send-email': SendEmail;                // args and result from the class
 *     'charge-card': { orderId: string };     // a task of another process or runtime: its args
 *   }
 * }
 *
 * A name not listed keeps `Record<string, unknown>` args, unless
 * StampededTypeOptions says `strictTaskNames: true`.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- filled by the application's declaration merging
export interface StampededTasks {}

/**
 * Switches for the typed registry, by declaration merging.
 * `strictTaskNames: true` refuses, at compile time, a task name that is not
 * in StampededTasks (a typo, or a task not declared yet).
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- filled by the application's declaration merging
export interface StampededTypeOptions {}

/** The task names StampededTasks lists. */
export type RegisteredTaskName = keyof StampededTasks & string;

/**
 * A task name enqueue() takes untyped: any name StampededTasks does not
 * list, or none under `strictTaskNames`.
 */
export type UnregisteredTaskName<Name extends string> = Name extends RegisteredTaskName
  ? never
  : StampededTypeOptions extends { strictTaskNames: true }
    ? never
    : Name;

/** A task, by its class or by a name StampededTasks lists: what the typed calls read the types of. */
export type TypedTask = TaskClass | RegisteredTaskName;

type OrAnyArgs<A> = unknown extends A ? Record<string, unknown> : A;
/** A chunk's handler gives its args by its jobs' type, and its result by its context's. */
type HandlerArgs<H> = H extends { handle(args: infer A, ...rest: any[]): any }
  ? OrAnyArgs<A>
  : H extends { handleChunk(jobs: ChunkJob<infer A>[], ...rest: any[]): any }
    ? OrAnyArgs<A>
    : never;
type HandlerResult<H> = H extends { handle(...args: any[]): infer R }
  ? Awaited<R>
  : H extends { handleChunk(jobs: any, ctx: ChunkContext<infer R>): any }
    ? R
    : unknown;
type Handler = { handle(...args: any[]): any } | { handleChunk(...args: any[]): any };
type EntryArgs<E> = E extends Handler ? HandlerArgs<E> : E;
type EntryResult<E> = E extends Handler ? HandlerResult<E> : unknown;

/**
 * The args type of a task: of its @Task() class's `handle()`, or its entry in
 * StampededTasks; `Record<string, unknown>` for any other name.
 */
export type ArgsOf<T> = T extends Type<infer H> ? HandlerArgs<H> : T extends RegisteredTaskName ? EntryArgs<StampededTasks[T]> : Record<string, unknown>;

/**
 * The result type of a task: what its @Task() class's `handle()` resolves
 * to, or what its StampededTasks entry's class does; `unknown` otherwise.
 */
export type ResultOf<T> = T extends Type<infer H> ? HandlerResult<H> : T extends RegisteredTaskName ? EntryResult<StampededTasks[T]> : unknown;
