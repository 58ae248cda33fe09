import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import type { TaskRegistry, RegisteredTask } from '../explorer/task.registry.js';
import type { JobEventType } from '../interfaces/job-event.interface.js';
import type { Job } from '../interfaces/job.interface.js';
import { JobAbortedError } from '../errors/stampeded.errors.js';
import type { ProcessTaskRunner } from '../isolation/process-task.runner.js';
import type { ControlGate } from '../control/control.gate.js';
import type { JobTracer } from '../tracing/job-tracer.js';
import { decideRetry, failureRecord, type HandlerFailure } from './retry-policy.js';
import { describeError } from './describe-error.js';
import { resultText } from './job-result.js';
import { RunReports } from './run-reports.js';
import { RunContext, type JobRunHooks } from './job-context.js';
import { StartGrace } from './start-grace.js';
import { RunningJobs, type RunningJob } from './running-jobs.js';
import type { FailureRecord, OutcomeRecorder } from './outcome-recorder.js';
import type { WorkerEvents } from './worker-events.js';
import type { ArgsValidator } from '../queue/args-validator.js';
import { INVALID_ARGS_AT_RUN, INVALID_ENCRYPTED_ARGS_AT_RUN } from '../stampeded.messages.js';
import type { JobEncryption } from '../encryption/job-encryption.js';
import { DEFAULT_LOG_LIMITS, LIMITS } from '../stampeded.constants.js';

export interface ExecutorConfig {
  workerId: string;
  /** Queue control (control/): whether to run a job, and what its failure means for its destination. */
  control?: ControlGate;
  /** OpenTelemetry (tracing/): a span per execution, when @opentelemetry/api is installed. */
  tracer?: JobTracer;
  /** The channel to notify the fleet of outcomes and progress on, asked at each write; undefined while nobody listens. */
  eventsChannel?: () => string | undefined;
  /** Encrypted args and results (encryption/): opened before anything sees the job, sealed before the completion. */
  encryption: JobEncryption;
}

/** How a job run ended, as far as this worker knows. */
export type RunOutcome = Extract<JobEventType, 'completed' | 'retrying' | 'discarded' | 'cancelled' | 'lost' | 'released'>;

/**
 * Runs claimed jobs, each to its recorded outcome: the handler's context,
 * its deadline and AbortSignal, the isolated process when the task asks for
 * one, and the outcome handed to the OutcomeRecorder -- completed, a failure
 * as the task's retry policy decides it, or given back. `onSettled` hears of
 * every slot that frees, so that the producer can start the next job.
 */
export class JobExecutor {
  private readonly logger = new Logger('Stampeded');
  private readonly running = new RunningJobs((entry) => void this.timeOut(entry));
  private readonly startGrace: StartGrace;
  /** What every job's context asks of its run (see RunContext). */
  private readonly runHooks: JobRunHooks<RunningJob> = {
    signalOf: (entry) => this.running.signalOf(entry),
    onAlive: (entry) => this.running.armDeadline(entry, Date.now()),
    onLost: (entry, reason) => this.abandon(entry, 'lost', new JobAbortedError(reason)),
    // Its outcome is being recorded, or it was cancelled, timed out or lost: nothing more is written.
    progress: (entry, text, value) => (entry.settled ? Promise.resolve(false) : this.reportsOf(entry).progress(text, value)),
    log: (entry, message, at) => {
      if (!entry.settled) this.reportsOf(entry).log(message, at);
    },
    openResult: (task, value) => this.config.encryption.open(task, value),
  };

  private readonly lineListeners: ((queue: string) => void)[] = [];

  constructor(
    private readonly db: StampededDatabase,
    private readonly tasks: TaskRegistry,
    private readonly recorder: OutcomeRecorder,
    private readonly events: WorkerEvents,
    private readonly config: ExecutorConfig,
    private readonly onSettled: (job: Job) => void,
    private readonly processRunner?: ProcessTaskRunner,
  ) {
    this.startGrace = new StartGrace(config.control);
  }

  get runningCount(): number {
    return this.running.size;
  }

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

  /** This worker's running jobs of the queue. */
  runningIn(queue: string): number {
    return this.running.countIn(queue);
  }

  /** The jobs running here now. */
  runningJobs(): Job[] {
    return this.running.all().map((r) => r.job);
  }

  isRunning(jobId: string): boolean {
    return this.running.get(jobId) !== undefined;
  }

  /**
   * Runs one claimed job to its recorded outcome. `claimedAt` is when it was
   * claimed by this process's clock: its deadline counts from there.
   * `countedAt`, by performance.now(), is no later than its claim counted it
   * in its rate limits' windows: it starts within its grace of that, or is
   * given back (StartGrace).
   */
  execute(job: Job, claimedAt?: number, countedAt?: number): Promise<RunOutcome> {
    // Opened before its events, its validate option or its handler see it.
    const entry = this.running.add(job, this.config.encryption.openToRun(job, this.tasks.get(job.task)?.metadata.encrypt));
    this.events.emit('active', job);
    const tracer = this.config.tracer;
    const run = tracer ? tracer.execute(job, this.config.workerId, () => this.run(entry, claimedAt, countedAt)) : this.run(entry, claimedAt, countedAt);
    // Every failure of a job's own is recorded inside run(); what escapes it
    // (a connection cut while queue control asked the database something) must
    // not end the process as an unhandled rejection. The job, unrecorded,
    // runs again when it expires.
    entry.done = run.catch((err: unknown) => {
      this.logger.error(`job ${job.id}: ${(err as Error)?.message ?? String(err)}; nothing was recorded, it will run again when it expires`);
      this.settle(entry);
      return 'lost' as const;
    });
    return entry.done;
  }

  private async run(entry: RunningJob, claimedAt: number | undefined, countedAt: number | undefined): Promise<RunOutcome> {
    const { job } = entry;
    const task = this.tasks.get(job.task);
    if (!task) {
      this.settle(entry);
      const error =
        `No handler for task "${job.task}" in this worker (pid ${process.pid}; tasks here: ${this.tasks.names().join(', ') || 'none'}). ` +
        `It will be retried: deploy a worker that has the task, or fix the task name.`;
      return this.recordFailure(job, this.handlerFailure({ job, error, kind: 'raised' }, undefined, error));
    }
    if (entry.sealing.unreadable) {
      this.settle(entry);
      return this.recordFailure(job, { kind: 'unrecoverable', error: entry.sealing.unreadable, retryDelayMs: null });
    }
    // Queue control may decline to run it (tenant over its share, breaker open): deferred, attempt refunded.
    const refusal = this.config.control?.admit(job);
    if (refusal) {
      const failure = await refusal;
      if (failure) {
        this.settle(entry);
        return this.recordFailure(job, failure);
      }
    }
    this.running.armDeadline(entry, claimedAt ?? Date.now());
    if (task.argsValidator) {
      const invalid = await this.checkArgs(task.argsValidator, job, entry.sealing.encrypted);
      if (entry.settled) return entry.abortReason === 'cancelled' ? 'cancelled' : 'lost';
      if (invalid) {
        this.settle(entry);
        return this.recordFailure(job, invalid);
      }
    }
    // The last moment before the handler: a rate limit counts its start here.
    // An isolated task's handler starts once its child process has booted,
    // after this.
    if (this.startGrace.passed(job, countedAt)) {
      this.settle(entry);
      return this.giveBack(job);
    }
    const ctx = new RunContext(this.db, this.config.workerId, job, this.runHooks, entry);
    let result: unknown;
    let stored: string | null = null;
    try {
      result = await this.invoke(task, job, ctx, entry);
      // A result that cannot be stored fails the attempt as a throw would.
      if (task.metadata.storeResult !== false) stored = resultText(job.task, result);
      if (stored !== null && entry.sealing.encrypted) stored = this.config.encryption.seal(`job ${job.id}`, 'result', job.task, stored, LIMITS.argsBytes);
    } catch (err) {
      // The run's last progress and log lines go before its outcome, while the job is still ours.
      await entry.reports?.flush();
      if (entry.settled) return entry.abortReason === 'cancelled' ? 'cancelled' : 'lost';
      this.settle(entry);
      if (entry.abortReason === 'shutdown') return this.giveBack(job);
      this.config.tracer?.raised(job, err);
      const error = describeError(err);
      const deferral = await this.config.control?.failed(job, err, error);
      const kind = (err as { workerExited?: boolean }).workerExited ? 'worker_exited' : 'raised';
      return this.recordFailure(job, deferral ?? this.handlerFailure({ job, error: err, kind }, task, error));
    }
    await entry.reports?.flush();
    if (entry.settled) return entry.abortReason === 'cancelled' ? 'cancelled' : 'lost';
    this.settle(entry);
    const owned = await this.recorder.complete(job, stored).catch((err: unknown) => {
      this.logger.error(`could not record completion of job ${job.id}: ${(err as Error).message}; it will run again when it expires`);
      return false;
    });
    this.events.emit(owned ? 'completed' : 'lost', job, { durationMs: Date.now() - entry.startedAt, result });
    if (owned) this.lineMoved(job);
    if (owned) this.config.control?.completed(job);
    else this.config.control?.recorded(job);
    return owned ? 'completed' : 'lost';
  }

  private invoke(task: RegisteredTask, job: Job, ctx: RunContext<RunningJob>, entry: RunningJob): Promise<unknown> {
    if (task.metadata.isolation === 'process') {
      if (!this.processRunner) throw new Error('isolation: process is not available in this worker');
      return this.processRunner.run(task, job, ctx, this.running.signalOf(entry), (message, at) => this.runHooks.log(entry, message, at));
    }
    return Promise.resolve(task.instance.handle(job.args, ctx));
  }

  private reportsOf(entry: RunningJob): RunReports {
    return (entry.reports ??= new RunReports(
      this.db,
      this.config.workerId,
      entry.job,
      this.tasks.get(entry.job.task)?.logLimits ?? DEFAULT_LOG_LIMITS,
      {
        onAlive: () => this.running.armDeadline(entry, Date.now()),
        onLost: (reason) => this.abandon(entry, 'lost', new JobAbortedError(reason)),
        onProgress: (progress) => {
          entry.job.progress = progress;
          this.events.emit('progress', entry.job, { progress });
        },
      },
      this.config.eventsChannel,
    ));
  }

  /**
   * The task's validate option on a job about to run: args that fail it
   * (a job inserted by SQL, another runtime or an older version) fail every
   * attempt alike, so the job is discarded at once, the issues in its error
   * history, rather than retried until its attempts run out.
   */
  private async checkArgs(validator: ArgsValidator, job: Job, encrypted: boolean): Promise<FailureRecord | undefined> {
    const issues = await validator.issues(job.args);
    if (!issues.length) return undefined;
    // An issue may quote the value it refuses: an encrypted job's error column gets none of them.
    const error = encrypted ? INVALID_ENCRYPTED_ARGS_AT_RUN(job.task, issues.length) : INVALID_ARGS_AT_RUN(job.task, issues);
    return { kind: 'unrecoverable', error, retryDelayMs: null };
  }

  /** The failure to record, as the task's retry policy decides it. */
  private handlerFailure(failure: HandlerFailure, task: RegisteredTask | undefined, error: string): FailureRecord {
    return failureRecord(failure, decideRetry(failure, task?.retryPolicy), error);
  }

  // ---- deadlines and aborts ----

  private async timeOut(entry: RunningJob): Promise<void> {
    if (entry.settled) return;
    const { job } = entry;
    const aborted = new JobAbortedError(`job ${job.id} exceeded expire_seconds (${job.expireSeconds}) without a touch`);
    this.abandon(entry, 'timed_out', aborted);
    await entry.reports?.flush();
    const failure: HandlerFailure = { job, error: aborted, kind: 'timed_out' };
    await this.recordFailure(job, this.handlerFailure(failure, this.tasks.get(job.task), `exceeded expire_seconds (${job.expireSeconds}) without a touch`));
  }

  /** Frees the slot and fires the handler's signal; what follows depends on why. */
  private abandon(entry: RunningJob, reason: NonNullable<RunningJob['abortReason']>, error: JobAbortedError): void {
    if (entry.settled) return;
    entry.abortReason = reason;
    this.settle(entry);
    // No longer ours: nothing more of its progress or log is written. A
    // timeout still flushes them, before recording the failure.
    if (reason === 'cancelled' || reason === 'lost') entry.reports?.stop();
    this.running.abort(entry, error);
    if (reason === 'lost') this.events.emit('lost', entry.job, { error: error.message });
  }

  /** The job was cancelled (by anyone): stop running it; the database already says cancelled. False: not running here. */
  cancel(jobId: string): boolean {
    const entry = this.running.get(jobId);
    if (!entry) return false;
    this.abandon(entry, 'cancelled', new JobAbortedError(`job ${jobId} was cancelled`));
    this.events.emit('cancelled', entry.job);
    return true;
  }

  /**
   * Stops every running job and records `heartbeat_lost` for those still
   * ours: this worker can no longer prove it is alive, and two executions of
   * one job at once are worse than an interrupted one.
   */
  async interruptAll(message: string): Promise<void> {
    const failures = this.running.all().map((entry) => {
      const aborted = new JobAbortedError(message);
      entry.abortReason = 'lost';
      this.settle(entry);
      this.running.abort(entry, aborted);
      return { entry, failure: { job: entry.job, error: aborted, kind: 'heartbeat_lost' } as HandlerFailure };
    });
    await Promise.all(
      failures.map(async ({ entry, failure }) => {
        await entry.reports?.flush();
        return this.recordFailure(failure.job, this.handlerFailure(failure, this.tasks.get(failure.job.task), message));
      }),
    );
  }

  /**
   * Lets running handlers finish for up to `timeoutMs`, then aborts the rest
   * and gives them back -- interrupted by us, not failed -- so that nothing
   * waits for the reaper.
   */
  async finishRunning(timeoutMs: number, abortGraceMs: number): Promise<void> {
    await this.running.settledWithin(timeoutMs);
    const stragglers = this.running.all();
    if (!stragglers.length) return;
    this.logger.warn(`shutdown: aborting ${stragglers.length} job(s) still running after ${timeoutMs} ms; they go back to the queue`);
    for (const entry of stragglers) {
      entry.abortReason = 'shutdown';
      this.running.abort(entry, new JobAbortedError('worker is shutting down'));
    }
    await this.running.settledWithin(abortGraceMs);
    for (const entry of this.running.all()) {
      this.settle(entry);
      await entry.reports?.flush();
      await this.giveBack(entry.job);
    }
  }

  // ---- outcomes ----

  private settle(entry: RunningJob): void {
    if (entry.settled) return;
    entry.settled = true;
    this.running.remove(entry);
    this.config.control?.settled(entry.job);
    this.onSettled(entry.job);
  }

  private async recordFailure(job: Job, failure: FailureRecord): Promise<RunOutcome> {
    const result = await this.recorder.fail(job, failure).catch((err: unknown) => {
      this.logger.error(`could not record failure of job ${job.id}: ${(err as Error).message}; it will run again when it expires`);
      return { owned: false } as const;
    });
    this.config.control?.recorded(job);
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

  /** Gives a job back without spending its attempt, unstarted or interrupted: it runs again as if never claimed. */
  async giveBack(job: Job): Promise<RunOutcome> {
    const owned = await this.recorder.release(job).catch(() => false);
    if (owned) this.lineMoved(job);
    this.events.emit(owned ? 'released' : 'lost', job);
    return owned ? 'released' : 'lost';
  }
}
