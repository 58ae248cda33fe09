import type { JobContext } from './task.interface.js';

/**
 * A task whose handler takes many jobs at once (`@Task(name, { chunk })`):
 * `handleChunk(jobs, ctx)` gets up to `size` of its jobs in one call, or
 * fewer once `waitMs` has passed since the first of them arrived.
 */
export interface ChunkOptions {
  /** The most jobs one `handleChunk()` call gets: 1 to 1,000. */
  size: number;
  /**
   * How long a chunk waits to fill, from the arrival of its first job,
   * before it runs with fewer than `size` jobs. Default 0: it runs with the
   * jobs the worker holds at that moment (a claim brings up to its batch).
   */
  waitMs?: number;
}

/**
 * One job of a chunk: its args, and the context a single job's handler
 * gets. `signal` fires when this job is cancelled, or when the whole chunk
 * is aborted (it timed out, the worker shuts down or lost its heartbeat);
 * `touch()`, `progress()` and `saveCheckpoint()` concern this job alone.
 */
export interface ChunkJob<Args extends object = Record<string, unknown>> extends JobContext {
  readonly args: Args;
}

/**
 * What a chunk's handler says about the chunk as a whole, and about each of
 * its jobs. A job given no outcome is completed when `handleChunk()`
 * returns, or fails with what it threw when it throws. Each outcome is
 * recorded when the handler has returned, every completion of the chunk in
 * one statement, each fenced by the job's own attempt: a job that was
 * cancelled meanwhile, or is no longer this worker's, stays as it is.
 */
export interface ChunkContext<Result = unknown> {
  readonly queue: string;
  readonly task: string;
  /** Fires when the chunk times out (the earliest deadline of its jobs), the worker shuts down, or it lost its heartbeat. */
  readonly signal: AbortSignal;
  /**
   * Says "still working" for every job of the chunk still running here:
   * pushes each one's deadline back by its expireSeconds. Resolves false
   * when none of them is this worker's any more; a job that is not fires its
   * own signal.
   */
  touch(): Promise<boolean>;
  /** Completes the job, with `result` as its stored result (see the task's storeResult). */
  complete(job: ChunkJob<any>, result?: Result): void;
  /**
   * Fails the job as a single job's handler throwing `error` would: retried
   * by the task's retry policy while it has attempts left, after exactly
   * `delayMs` for a RetryAfterError, discarded at once for an
   * UnrecoverableError, deferred for a BreakerOpenError of its destination.
   */
  fail(job: ChunkJob<any>, error: unknown): void;
  /** Discards the job at once (`unrecoverable`), whatever attempts it has left, and dead-letters it when it has a dead-letter queue. */
  discard(job: ChunkJob<any>, error: unknown): void;
  /** Cancels the job: it ends `cancelled` and never runs again. */
  cancel(job: ChunkJob<any>): void;
}

/**
 * The handler of a chunked task. One call per chunk; each job keeps its
 * own outcome (see ChunkContext).
 *
 * @example
 * @Task('index-product', { chunk: { size: 100, waitMs: 500 } })
 * export class IndexProducts implements ChunkTaskHandler<{ productId: number }> {
 *   async handleChunk(jobs: ChunkJob<{ productId: number }>[], ctx: ChunkContext) {
 *     await this.search.bulkIndex(jobs.map((job) => job.args.productId));
 *   }
 * }
 */
export interface ChunkTaskHandler<Args extends object = Record<string, unknown>, Result = unknown> {
  handleChunk(jobs: ChunkJob<Args>[], ctx: ChunkContext<Result>): Promise<void> | void;
}
