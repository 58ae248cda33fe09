import { Logger } from '@nestjs/common';
import type { RegisteredTask, TaskRegistry } from '../explorer/task.registry.js';
import type { Job } from '../interfaces/job.interface.js';
import type { ControlGate } from '../control/control.gate.js';
import type { JobTracer } from '../tracing/job-tracer.js';
import { decideRetry, failureRecord, type HandlerFailure } from './retry-policy.js';
import { describeError } from './describe-error.js';
import type { FailureRecord, FailureResult, OutcomeRecorder } from './outcome-recorder.js';
import type { WorkerEvents } from './worker-events.js';
import type { RunOutcome } from './job-executor.js';

/**
 * What a job's outcome sets off once the executor knows it: the fenced write
 * (OutcomeRecorder), the job's events, queue control's bookkeeping, a
 * retried keyed job's place in its key's order, and the wake-up for the
 * next job of its key. One for a single job's run and a chunk's jobs alike.
 */
export class JobOutcomes {
  private readonly logger = new Logger('Stampeded');
  private readonly lineListeners: ((queue: string) => void)[] = [];

  constructor(
    private readonly recorder: OutcomeRecorder,
    private readonly tasks: TaskRegistry,
    private readonly events: WorkerEvents,
    private readonly control?: ControlGate,
    private readonly tracer?: JobTracer,
  ) {}

  /**
   * Hears the queue of each keyed job whose outcome was written: the next
   * job of its key is released with that outcome and claimable now. The
   * release wakes the fleet's workers too; claiming here at once saves this
   * one the notification's round trip.
   */
  onLineMoved(listener: (queue: string) => void): void {
    this.lineListeners.push(listener);
  }

  private lineMoved(job: Job): void {
    if (job.orderingKey === null || job.orderingKey === undefined) return;
    for (const listener of this.lineListeners) listener(job.queue);
  }

  /** The failure to record, as the task's retry policy decides it. */
  decide(failure: HandlerFailure, task: RegisteredTask | undefined, error: string): FailureRecord {
    return failureRecord(failure, decideRetry(failure, task?.retryPolicy), error);
  }

  /** What the handler threw for the job, as the failure to record: its destination's deferral, or the retry policy's decision. */
  async raised(job: Job, err: unknown, task: RegisteredTask | undefined): Promise<FailureRecord> {
    this.tracer?.raised(job, err);
    const error = describeError(err);
    const deferral = await this.control?.failed(job, err, error);
    const kind = (err as { workerExited?: boolean } | null)?.workerExited ? 'worker_exited' : 'raised';
    return deferral ?? this.decide({ job, error: err, kind }, task, error);
  }

  /** Records the completion (`stored`: the result's JSON text, or null) and says so. */
  async completed(job: Job, stored: string | null, result: unknown, startedAt: number): Promise<RunOutcome> {
    const owned = await this.recorder.complete(job, stored).catch((err: unknown) => {
      this.logger.error(`could not record completion of job ${job.id}: ${(err as Error).message}; it will run again when it expires`);
      return false;
    });
    this.events.emit(owned ? 'completed' : 'lost', job, { durationMs: Date.now() - startedAt, result });
    if (owned) this.lineMoved(job);
    if (owned) this.control?.completed(job);
    else this.control?.recorded(job);
    return owned ? 'completed' : 'lost';
  }

  async failed(job: Job, failure: FailureRecord): Promise<RunOutcome> {
    const result = await this.recorder.fail(job, failure).catch((err: unknown) => {
      this.logger.error(`could not record failure of job ${job.id}: ${(err as Error).message}; it will run again when it expires`);
      return { owned: false } as const;
    });
    return this.afterFailure(job, failure, result);
  }

  /** The failures of many jobs, recorded in one statement (OutcomeRecorder.failMany). */
  async failedMany(failures: readonly { job: Job; failure: FailureRecord }[]): Promise<RunOutcome[]> {
    if (!failures.length) return [];
    const results = await this.recorder.failMany(failures).catch((err: unknown) => {
      this.logger.error(`could not record the failures of ${failures.length} job(s): ${(err as Error).message}; they will run again when they expire`);
      return failures.map(() => ({ owned: false }) as const);
    });
    return Promise.all(failures.map(({ job, failure }, i) => this.afterFailure(job, failure, results[i])));
  }

  private async afterFailure(job: Job, failure: FailureRecord, result: FailureResult): Promise<RunOutcome> {
    this.control?.recorded(job);
    const detail = { error: failure.error, failureKind: failure.kind };
    if (!result.owned) {
      this.events.emit('lost', job, detail);
      return 'lost';
    }
    this.events.emit('failed', job, detail);
    if (result.state === 'retryable') {
      // A deferral by queue control is not a retry: it keeps its place.
      if (job.orderingKey !== null && failure.kind !== 'breaker_open' && failure.kind !== 'throttled') {
        if (this.tasks.get(job.task)?.metadata.ordering?.retryKeepsPlace === false) {
          await this.recorder.toBackOfOrder(job).catch((err: unknown) => {
            this.logger.warn(`job ${job.id} keeps its place in its key's order: moving it back failed (${(err as Error).message})`);
          });
        }
      }
      this.lineMoved(job);
      this.events.emit('retrying', job, { ...detail, retryDelayMs: failure.retryDelayMs ?? undefined });
      return 'retrying';
    }
    this.lineMoved(job);
    this.events.emit('discarded', job, { ...detail, deadLettered: result.deadLettered });
    return 'discarded';
  }

  /** The job's own handler cancelled it (a chunk's ctx.cancel()), fenced. */
  async cancelled(job: Job): Promise<RunOutcome> {
    const owned = await this.recorder.cancel(job).catch((err: unknown) => {
      this.logger.error(`could not record the cancel of job ${job.id}: ${(err as Error).message}; it will run again when it expires`);
      return false;
    });
    this.control?.recorded(job);
    if (owned) this.lineMoved(job);
    this.events.emit(owned ? 'cancelled' : 'lost', job);
    return owned ? 'cancelled' : 'lost';
  }

  /** Gives a job back without spending its attempt, unstarted or interrupted: it runs again as if never claimed. */
  async givenBack(job: Job): Promise<RunOutcome> {
    const owned = await this.recorder.release(job).catch(() => false);
    if (owned) this.lineMoved(job);
    this.events.emit(owned ? 'released' : 'lost', job);
    return owned ? 'released' : 'lost';
  }
}
