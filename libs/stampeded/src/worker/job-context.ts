import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import { CHECKPOINT, TOUCH } from '../sql/jobs.sql.js';
import { JOB_DEPENDENCIES, WORKFLOW_MEMBER } from '../sql/workflows.sql.js';
import { CheckpointError, InvalidJobError } from '../errors/stampeded.errors.js';
import { CHECKPOINT_NOT_OWNED, CHECKPOINT_TOO_LARGE, NOT_IN_WORKFLOW } from '../stampeded.messages.js';
import type { BatchCounts, WorkflowDependencyJob } from '../interfaces/workflow.interface.js';
import { LIMITS } from '../stampeded.constants.js';
import { toJsonObject } from '../queue/job-input.validator.js';
import { progressText } from './progress-reporter.js';
import type { Job, JobProgress } from '../interfaces/job.interface.js';
import type { JobContext } from '../interfaces/task.interface.js';

/**
 * What a job's context asks of the run it belongs to. One object for every
 * run of a worker, told which run: a context with closures of its own per job
 * is a large share of what a no-op job allocates (NOTES.md, "What the worker
 * allocates per job").
 */
export interface JobRunHooks<Run> {
  /** The run's AbortSignal, made when the handler first reads ctx.signal: most never do. */
  signalOf(run: Run): AbortSignal;
  /** The job answered a touch or saved a checkpoint: push its deadline back. */
  onAlive(run: Run): void;
  /** The database says the job is no longer ours. */
  onLost(run: Run, reason: string): void;
  /** ctx.progress(), its value already checked: see ProgressReporter. */
  progress(run: Run, text: string, value: JobProgress): Promise<boolean>;
  /** Another job's stored result (ctx.dependencies()), opened when it is encrypted (JobEncryption.open). */
  openResult(task: string, value: unknown): unknown;
  /** ctx.log(): see LogReporter. `at`, when the line was written elsewhere (an isolated child process). */
  log(run: Run, message: unknown, at?: Date): void;
}

const logger = new Logger('Stampeded');

function ignoreError(): void {}

/** The `ctx` a handler receives. What it holds for the worker is private: a handler that logs or serialises its context sees the job only. */
export class RunContext<Run> implements JobContext {
  readonly id: string;
  readonly queue: string;
  readonly task: string;
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly tenantId: string | null;
  readonly destination: string | null;
  readonly orderingKey: string | null;
  readonly meta: Readonly<Record<string, unknown>>;
  readonly checkpoint: unknown;
  readonly #db: StampededDatabase;
  readonly #workerId: string;
  readonly #hooks: JobRunHooks<Run>;
  readonly #run: Run;

  constructor(db: StampededDatabase, workerId: string, job: Job, hooks: JobRunHooks<Run>, run: Run) {
    this.id = job.id;
    this.queue = job.queue;
    this.task = job.task;
    this.attempt = job.attempt;
    this.maxAttempts = job.maxAttempts;
    this.tenantId = job.tenantId;
    this.destination = job.destination;
    this.orderingKey = job.orderingKey;
    this.meta = job.meta;
    this.checkpoint = job.checkpoint ?? null;
    this.#db = db;
    this.#workerId = workerId;
    this.#hooks = hooks;
    this.#run = run;
  }

  get signal(): AbortSignal {
    return this.#hooks.signalOf(this.#run);
  }

  /** The outcome fence of every statement a context runs: (queue, id, worker, attempt). */
  #fence(): unknown[] {
    return [this.queue, this.id, this.#workerId, this.attempt];
  }

  async touch(): Promise<boolean> {
    const [row] = await this.#db.query<{ owned: boolean | null }>(TOUCH, this.#fence());
    if (row?.owned) {
      this.#hooks.onAlive(this.#run);
      return true;
    }
    this.#hooks.onLost(this.#run, 'touch found the job no longer owned by this worker');
    return false;
  }

  async progress(value: JobProgress): Promise<boolean> {
    return this.#hooks.progress(this.#run, progressText(value), value);
  }

  log(message: string): void {
    this.#hooks.log(this.#run, message);
  }

  async dependencies<Result = unknown>(): Promise<WorkflowDependencyJob<Result>[]> {
    const rows = await this.#db.query(JOB_DEPENDENCIES, [this.id]);
    if (rows.length === 0) {
      const [member] = await this.#db.query(WORKFLOW_MEMBER, [this.id]);
      if (!member) throw new InvalidJobError(NOT_IN_WORKFLOW(this.id, 'dependencies'));
    }
    return rows.map((row) => ({
      name: row.name,
      id: row.id,
      queue: row.queue,
      task: row.task,
      state: row.state,
      result: row.result == null ? null : (this.#hooks.openResult(row.task, row.result) as Result),
      lastError: row.last_error ?? null,
    }));
  }

  async childResults(): Promise<Record<string, any>> {
    const deps = await this.dependencies();
    return Object.fromEntries(deps.map((dep) => [dep.name, dep.result]));
  }

  async batch(): Promise<BatchCounts> {
    const deps = await this.dependencies();
    const counts: BatchCounts = { total: deps.length, completed: 0, discarded: 0, cancelled: 0 };
    for (const dep of deps) {
      // Only success removes a job (removeOnComplete): one that is gone completed.
      if (dep.state === 'completed' || dep.state === 'removed') counts.completed++;
      else if (dep.state === 'discarded') counts.discarded++;
      else if (dep.state === 'cancelled') counts.cancelled++;
    }
    return counts;
  }

  async saveCheckpoint(state: unknown): Promise<void> {
    const text = state === undefined ? 'null' : JSON.stringify(state);
    if (state !== null && typeof state === 'object' && !Array.isArray(state)) {
      toJsonObject(`checkpoint of job ${this.id}`, 'state', state, Number.MAX_SAFE_INTEGER);
    }
    const bytes = Buffer.byteLength(text ?? 'null', 'utf8');
    if (bytes > LIMITS.checkpointBytes) throw new CheckpointError(CHECKPOINT_TOO_LARGE(bytes, LIMITS.checkpointBytes));
    // The schema RAISEs a WARNING when a large checkpoint keeps growing;
    // node-postgres hands it over as a notice on the connection that ran it.
    const client = await this.#db.pool.connect();
    const onNotice = (notice: { severity?: string; message?: string }) => {
      if (notice.severity === 'WARNING') logger.warn(`job ${this.id} (${this.task}): ${notice.message}`);
    };
    client.on('notice', onNotice);
    // A checked-out client has no 'error' listener of the pool's: a cut
    // connection would otherwise end the process (see StampededDatabase.transaction).
    client.on('error', ignoreError);
    try {
      const result = await client.query<{ seq: number | null }>(this.#db.queryConfig(CHECKPOINT, [...this.#fence(), text]));
      if (result.rows[0]?.seq == null) {
        this.#hooks.onLost(this.#run, 'saveCheckpoint found the job no longer owned by this worker');
        throw new CheckpointError(CHECKPOINT_NOT_OWNED(this.id));
      }
      this.#hooks.onAlive(this.#run);
    } catch (err) {
      if ((err as { code?: string }).code === '23514') throw new CheckpointError(CHECKPOINT_TOO_LARGE(bytes, LIMITS.checkpointBytes));
      throw err;
    } finally {
      client.off('notice', onNotice);
      client.off('error', ignoreError);
      client.release();
    }
  }
}
