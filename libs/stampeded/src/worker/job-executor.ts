import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import type { TaskRegistry, RegisteredTask } from '../explorer/task.registry.js';
import type { JobEventType } from '../interfaces/job-event.interface.js';
import type { Job } from '../interfaces/job.interface.js';
import { JobAbortedError } from '../errors/stampeded.errors.js';
import type { ProcessTaskRunner } from '../isolation/process-task.runner.js';
import type { ControlGate } from '../control/control.gate.js';
import type { JobTracer } from '../tracing/job-tracer.js';
import type { HandlerFailure } from './retry-policy.js';
import { resultText } from './job-result.js';
import { RunReports } from './run-reports.js';
import { RunContext, type JobRunHooks } from './job-context.js';
import { JobAdmission } from './job-admission.js';
import { RunningJobs, type RunningJob } from './running-jobs.js';
import type { OutcomeRecorder } from './outcome-recorder.js';
import type { WorkerEvents } from './worker-events.js';
import { JobOutcomes } from './job-outcomes.js';
import { abortChunk, Chunks, type RunningChunk } from './chunks.js';
import { ChunkRunner } from './chunk-runner.js';
import type { ChunkRoom } from './job-producer.js';
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
 * one, and the outcome handed to JobOutcomes -- completed, a failure as the
 * task's retry policy decides it, or given back. A chunked task's jobs go
 * to its chunks (Chunks, ChunkRunner), each still a running job here with
 * its own deadline, signal and outcome. `onSlotFreed` hears of every job
 * that leaves its slot, so that the producer can start the next job.
 */
export class JobExecutor {
  private readonly logger = new Logger('Stampeded');
  private readonly running = new RunningJobs((entry) => void this.timeOut(entry));
  private readonly admission: JobAdmission;
  private readonly outcomes: JobOutcomes;
  private readonly chunkSet: Chunks;
  private readonly chunkRunner: ChunkRunner;
  /** How chunked tasks' jobs take slots, for the producer; undefined when no task of this worker is chunked. */
  readonly chunks?: ChunkRoom;
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

  constructor(
    private readonly db: StampededDatabase,
    private readonly tasks: TaskRegistry,
    recorder: OutcomeRecorder,
    private readonly events: WorkerEvents,
    private readonly config: ExecutorConfig,
    private readonly onSlotFreed: () => void,
    private readonly processRunner?: ProcessTaskRunner,
  ) {
    this.outcomes = new JobOutcomes(recorder, tasks, events, config.control, config.tracer);
    this.admission = new JobAdmission(config.control, this.outcomes, {
      settle: (entry) => this.settle(entry),
      arm: (entry, from) => this.running.armDeadline(entry, from),
      giveBack: (job) => this.giveBack(job),
    });
    this.chunkSet = new Chunks(
      tasks,
      (chunk) => this.runChunk(chunk),
      (queue) => config.control?.startGraceMs(queue) !== undefined,
      () => this.onSlotFreed(),
    );
    this.chunkRunner = new ChunkRunner(
      {
        db,
        workerId: config.workerId,
        hooks: this.runHooks,
        outcomes: this.outcomes,
        events,
        tracer: config.tracer,
        admit: (entry, task, countedAt) => this.admission.admit(entry, task, countedAt),
        storedResult: (entry, task, result) => this.storedResult(entry, task, result),
        settle: (entry) => this.settle(entry),
      },
      this.chunkSet,
    );
    if (tasks.all().some((task) => task.chunk)) this.chunks = this.chunkSet;
  }

  /** Slots in use: a job running alone takes one, and so does a chunk, filling or running, whatever it holds. */
  get runningCount(): number {
    return this.running.size - this.chunkSet.jobs + this.chunkSet.slots;
  }

  /** See JobOutcomes.onLineMoved. */
  onLineMoved(listener: (queue: string) => void): void {
    this.outcomes.onLineMoved(listener);
  }

  /** This worker's running jobs of the queue, those in chunks too. */
  runningIn(queue: string): number {
    return this.running.countIn(queue);
  }

  /** The jobs running here now, and those in chunks still filling. */
  runningJobs(): Job[] {
    return this.running.all().map((r) => r.job);
  }

  isRunning(jobId: string): boolean {
    return this.running.get(jobId) !== undefined;
  }

  attemptOf(jobId: string): number | undefined {
    return this.running.get(jobId)?.job.attempt;
  }

  /**
   * Runs one claimed job to its recorded outcome. `claimedAt` is when it was
   * claimed by this process's clock: its deadline counts from there.
   * `countedAt`, by performance.now(), is no later than its claim counted it
   * in its rate limits' windows: it starts within its grace of that, or is
   * given back (StartGrace). A chunked task's job joins its chunk.
   */
  execute(job: Job, claimedAt?: number, countedAt?: number): Promise<RunOutcome> {
    const task = this.tasks.get(job.task);
    // Opened before its events, its validate option or its handler see it.
    const entry = this.running.add(job, this.config.encryption.openToRun(job, task?.metadata.encrypt));
    if (task?.chunk) {
      this.running.armDeadline(entry, claimedAt ?? Date.now());
      entry.done = this.chunkSet.add(entry, task, countedAt);
      return entry.done;
    }
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

  /** Starts every chunk still filling, with the jobs it holds: drain() runs each job as it claims it. */
  startChunks(): void {
    this.chunkSet.startFilling();
  }

  private runChunk(chunk: RunningChunk): Promise<void> {
    return this.chunkRunner.run(chunk).catch((err: unknown) => {
      const left = chunk.entries.filter((entry) => !entry.settled);
      this.logger.error(
        `chunk of "${chunk.task.metadata.name}": ${(err as Error)?.message ?? String(err)}; nothing was recorded for ${left.length} job(s), they will run again when they expire`,
      );
      for (const entry of left) this.settle(entry);
    });
  }

  private async run(entry: RunningJob, claimedAt: number | undefined, countedAt: number | undefined): Promise<RunOutcome> {
    const { job } = entry;
    const task = this.tasks.get(job.task);
    if (!task) {
      this.settle(entry);
      const error =
        `No handler for task "${job.task}" in this worker (pid ${process.pid}; tasks here: ${this.tasks.names().join(', ') || 'none'}). ` +
        `It will be retried: deploy a worker that has the task, or fix the task name.`;
      return this.outcomes.failed(job, this.outcomes.decide({ job, error, kind: 'raised' }, undefined, error));
    }
    const refused = await this.admission.admit(entry, task, countedAt, claimedAt ?? Date.now());
    if (refused) return refused;
    const ctx = new RunContext(this.db, this.config.workerId, job, this.runHooks, entry);
    let result: unknown;
    let stored: string | null = null;
    try {
      result = await this.invoke(task, job, ctx, entry);
      // A result that cannot be stored fails the attempt as a throw would.
      stored = this.storedResult(entry, task, result);
    } catch (err) {
      // The run's last progress and log lines go before its outcome, while the job is still ours.
      await entry.reports?.flush();
      if (entry.settled) return entry.abortReason === 'cancelled' ? 'cancelled' : 'lost';
      this.settle(entry);
      if (entry.abortReason === 'shutdown') return this.giveBack(job);
      return this.outcomes.failed(job, await this.outcomes.raised(job, err, task));
    }
    await entry.reports?.flush();
    if (entry.settled) return entry.abortReason === 'cancelled' ? 'cancelled' : 'lost';
    this.settle(entry);
    return this.outcomes.completed(job, stored, result, entry.startedAt);
  }

  /**
   * What the completion stores of a handler's result: its JSON text, sealed
   * when the job's args are encrypted; null for none. Throws, failing the
   * job as its handler throwing would, for a result that cannot be stored.
   */
  private storedResult(entry: RunningJob, task: RegisteredTask, result: unknown): string | null {
    if (task.metadata.storeResult === false) return null;
    const { job } = entry;
    const stored = resultText(job.task, result);
    if (stored === null || !entry.sealing.encrypted) return stored;
    return this.config.encryption.seal(`job ${job.id}`, 'result', job.task, stored, LIMITS.argsBytes);
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
      // Lines a handler writes often hold what its args do: an encrypted job's are sealed as its args are.
      entry.sealing.encrypted ? (line) => this.config.encryption.sealLine(entry.job.task, line) : undefined,
    ));
  }

  // ---- deadlines and aborts ----

  /**
   * A job past its deadline. A running chunk's deadline is the earliest of
   * its jobs': past it, the chunk's signal fires and each of its jobs still
   * running fails `timed_out`, each by its own retry policy and attempts.
   */
  private async timeOut(entry: RunningJob): Promise<void> {
    if (entry.settled) return;
    const chunk = entry.chunk?.state === 'running' ? entry.chunk : undefined;
    const entries = chunk ? chunk.entries.filter((e) => !e.settled) : [entry];
    const reason = (job: Job) => `exceeded expire_seconds (${job.expireSeconds}) without a touch`;
    if (chunk) abortChunk(chunk, new JobAbortedError(`the chunk's job ${entry.job.id} ${reason(entry.job)}`));
    const failures = entries.map((e) => {
      const aborted = new JobAbortedError(`job ${e.job.id} ${reason(e.job)}`);
      this.abandon(e, 'timed_out', aborted);
      const failure: HandlerFailure = { job: e.job, error: aborted, kind: 'timed_out' };
      return { entry: e, failure: this.outcomes.decide(failure, this.tasks.get(e.job.task), reason(e.job)) };
    });
    await Promise.all(entries.map((e) => e.reports?.flush()));
    await this.outcomes.failedMany(failures.map(({ entry: e, failure }) => ({ job: e.job, failure })));
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

  /**
   * The database does not have this run's claim: a failover lost it, or the
   * job was given away. Stopped as a lost job (its signal fires); its
   * outcome would be fenced off anyway. A chunk's job is left to its chunk.
   */
  disown(job: Job): void {
    const entry = this.running.get(job.id);
    if (!entry || entry.job.attempt !== job.attempt || entry.chunk) return;
    this.abandon(entry, 'lost', new JobAbortedError(`job ${job.id} attempt ${job.attempt} is no longer this worker's in the database`));
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
   * one job at once are worse than an interrupted one. The jobs of chunks
   * still filling never started: they go back as if never claimed.
   */
  async interruptAll(message: string): Promise<void> {
    const unstarted = this.giveBackUnstarted();
    const failures = this.running.all().map((entry) => {
      const aborted = new JobAbortedError(message);
      entry.abortReason = 'lost';
      this.settle(entry);
      this.running.abort(entry, aborted);
      if (entry.chunk) abortChunk(entry.chunk, aborted);
      return { entry, failure: { job: entry.job, error: aborted, kind: 'heartbeat_lost' } as HandlerFailure };
    });
    await Promise.all([
      unstarted,
      ...failures.map(async ({ entry, failure }) => {
        await entry.reports?.flush();
        return this.outcomes.failed(failure.job, this.outcomes.decide(failure, this.tasks.get(failure.job.task), message));
      }),
    ]);
  }

  /**
   * Lets running handlers finish for up to `timeoutMs`, then aborts the rest
   * and gives them back -- interrupted by us, not failed -- so that nothing
   * waits for the reaper. Chunks still filling go back at once.
   */
  async finishRunning(timeoutMs: number, abortGraceMs: number): Promise<void> {
    await this.giveBackUnstarted();
    await this.running.settledWithin(timeoutMs);
    const stragglers = this.running.all();
    if (!stragglers.length) return;
    this.logger.warn(`shutdown: aborting ${stragglers.length} job(s) still running after ${timeoutMs} ms; they go back to the queue`);
    for (const entry of stragglers) {
      const aborted = new JobAbortedError('worker is shutting down');
      entry.abortReason = 'shutdown';
      this.running.abort(entry, aborted);
      if (entry.chunk) abortChunk(entry.chunk, aborted);
    }
    await this.running.settledWithin(abortGraceMs);
    for (const entry of this.running.all()) {
      this.settle(entry);
      await entry.reports?.flush();
      const outcome = await this.giveBack(entry.job);
      this.chunkSet.finish(entry, outcome);
    }
  }

  /** Gives back the jobs of chunks still filling: they never started. */
  private async giveBackUnstarted(): Promise<void> {
    await Promise.all(
      this.chunkSet.takeUnstarted().map(async (entry) => {
        this.settle(entry);
        this.chunkSet.finish(entry, await this.giveBack(entry.job));
      }),
    );
  }

  // ---- outcomes ----

  private settle(entry: RunningJob): void {
    if (entry.settled) return;
    entry.settled = true;
    this.running.remove(entry);
    this.chunkSet.left(entry);
    this.config.control?.settled(entry.job);
    this.onSlotFreed();
  }

  /** Gives a job back without spending its attempt, unstarted or interrupted: it runs again as if never claimed. */
  giveBack(job: Job): Promise<RunOutcome> {
    return this.outcomes.givenBack(job);
  }
}
