import type { StampededDatabase } from '../database/stampeded-database.js';
import { InvalidJobError } from '../errors/stampeded.errors.js';
import type { Job } from '../interfaces/job.interface.js';
import type { ChunkContext, ChunkJob } from '../interfaces/chunk.interface.js';
import { TOUCH_MANY } from '../sql/jobs.sql.js';
import { CHUNK_JOB_UNKNOWN, CHUNK_OUTCOME_TWICE } from '../stampeded.messages.js';
import { RunContext, type JobRunHooks } from './job-context.js';

/** What a chunk's handler said of one of its jobs. */
export type ChunkMark = { kind: 'complete'; result: unknown } | { kind: 'fail'; error: unknown } | { kind: 'discard'; error: unknown } | { kind: 'cancel' };

/** One job of a chunk as its handler sees it: the context a single job's handler gets, and its args. */
export class ChunkJobContext<Run> extends RunContext<Run> implements ChunkJob {
  readonly args: Record<string, unknown>;

  constructor(db: StampededDatabase, workerId: string, job: Job, hooks: JobRunHooks<Run>, run: Run) {
    super(db, workerId, job, hooks, run);
    this.args = job.args;
  }
}

/** What a chunk's context asks of its run, besides what each job's context asks (JobRunHooks). */
export interface ChunkRunHooks<Run> {
  /** The chunk's AbortSignal. */
  signal(): AbortSignal;
  /** Whether the job's run has settled: cancelled, timed out or lost. */
  settled(run: Run): boolean;
}

/**
 * The `ctx` of a chunk's handler: the chunk's signal and touch, and the
 * outcome it gives each job, read when handleChunk() has returned.
 */
export class ChunkRun<Run> implements ChunkContext {
  readonly queue: string;
  readonly task: string;
  /** The jobs handleChunk() gets, in claim order. */
  readonly jobs: ChunkJobContext<Run>[];
  readonly #runs = new Map<ChunkJob<any>, Run>();
  readonly #marks = new Map<Run, ChunkMark>();
  readonly #db: StampededDatabase;
  readonly #workerId: string;
  readonly #hooks: JobRunHooks<Run> & ChunkRunHooks<Run>;

  constructor(
    db: StampededDatabase,
    workerId: string,
    queue: string,
    task: string,
    runs: readonly { job: Job; run: Run }[],
    hooks: JobRunHooks<Run> & ChunkRunHooks<Run>,
  ) {
    this.queue = queue;
    this.task = task;
    this.#db = db;
    this.#workerId = workerId;
    this.#hooks = hooks;
    this.jobs = runs.map(({ job, run }) => {
      const context = new ChunkJobContext(db, workerId, job, hooks, run);
      this.#runs.set(context, run);
      return context;
    });
  }

  get signal(): AbortSignal {
    return this.#hooks.signal();
  }

  async touch(): Promise<boolean> {
    const live = this.jobs.filter((job) => !this.#hooks.settled(this.#runs.get(job)!));
    if (!live.length) return false;
    const rows = await this.#db.query<{ id: string }>(TOUCH_MANY, [
      live.map((j) => j.queue),
      live.map((j) => j.id),
      this.#workerId,
      live.map((j) => j.attempt),
    ]);
    const owned = new Set(rows.map((r) => r.id));
    for (const job of live) {
      const run = this.#runs.get(job)!;
      if (owned.has(job.id)) this.#hooks.onAlive(run);
      else this.#hooks.onLost(run, 'touch found the job no longer owned by this worker');
    }
    return owned.size > 0;
  }

  complete(job: ChunkJob<any>, result?: unknown): void {
    this.#mark(job, { kind: 'complete', result });
  }

  fail(job: ChunkJob<any>, error: unknown): void {
    this.#mark(job, { kind: 'fail', error });
  }

  discard(job: ChunkJob<any>, error: unknown): void {
    this.#mark(job, { kind: 'discard', error });
  }

  cancel(job: ChunkJob<any>): void {
    this.#mark(job, { kind: 'cancel' });
  }

  /** What the handler said of the job's run; undefined: nothing. */
  markOf(run: Run): ChunkMark | undefined {
    return this.#marks.get(run);
  }

  #mark(job: ChunkJob<any>, mark: ChunkMark): void {
    const run = this.#runs.get(job);
    if (run === undefined) throw new InvalidJobError(CHUNK_JOB_UNKNOWN(this.task, (job as { id?: unknown } | null)?.id));
    const first = this.#marks.get(run);
    if (first) throw new InvalidJobError(CHUNK_OUTCOME_TWICE(job.id, first.kind));
    this.#marks.set(run, mark);
  }
}
