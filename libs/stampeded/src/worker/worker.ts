import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import type { TaskRegistry, RegisteredTask } from '../explorer/task.registry.js';
import type { JobEvents } from '../events/job-events.js';
import type { JobEvent, JobEventType } from '../interfaces/job-event.interface.js';
import type { Job } from '../interfaces/job.interface.js';
import { CLAIM_BATCH } from '../sql/jobs.sql.js';
import { UNKNOWN_CLAIMS } from '../sql/workers.sql.js';
import { toClaimedJob } from '../queue/job.mapper.js';
import { decideRetry, failureRecord, type HandlerFailure } from './retry-policy.js';
import { describeError } from './describe-error.js';
import { AutoPrefetch } from './auto-prefetch.js';
import { ClaimCursor } from './claim-cursor.js';
import { RunContext, type JobRunHooks } from './job-context.js';
import { isConnectionError, OutcomeRecorder, type FailureRecord } from './outcome-recorder.js';
import type { ProcessTaskRunner } from '../isolation/process-task.runner.js';
import type { ControlGate } from '../control/control.gate.js';
import { CLAIM_FAIR } from '../sql/control.sql.js';
import type { JobTracer } from '../tracing/job-tracer.js';

export interface WorkerConfig {
  workerId: string;
  queues: string[];
  concurrency: number;
  /** Jobs claimed ahead of free slots; `'auto'` sizes it from the measured rate (AutoPrefetch). */
  prefetch: number | 'auto';
  claimBatchSize: number;
  completionBatchSize: number;
  pollIntervalMs: number;
  /** Per-queue caps from registerQueue({ concurrency }). */
  queueConcurrency: Map<string, number>;
  /** Queue control (control/): verdicts, breakers and tenant shares, shared by the fleet. */
  control?: ControlGate;
  /** OpenTelemetry (tracing/): a span per execution, when @opentelemetry/api is installed. */
  tracer?: JobTracer;
}

/** How a job run ended, as far as this worker knows. */
export type RunOutcome = Extract<JobEventType, 'completed' | 'retrying' | 'discarded' | 'cancelled' | 'lost' | 'released'>;

interface RunningJob {
  job: Job;
  /**
   * Made on first use of the handler's signal. Most handlers never look at it,
   * and an AbortController per job was a measurable share of a no-op job's
   * cost (bench/RESULTS.md).
   */
  controller?: AbortController;
  /** Set when the job was aborted before its signal was made. */
  abortedWith?: Error;
  startedAt: number;
  settled: boolean;
  /** Why the signal fired, when it did. */
  abortReason?: 'timed_out' | 'cancelled' | 'lost' | 'shutdown';
  /** When the job times out unless it touches (epoch ms). */
  deadlineAt: number;
  done: Promise<RunOutcome>;
}

/**
 * Deadlines are checked by one sweep over the running jobs, not by a timer per
 * job: arming and clearing a setTimeout for every job cost more than the job
 * itself on the no-op benchmark. A job times out at most this late.
 */
const DEADLINE_SWEEP_MS = 100;

/** Claim statements one worker runs at once. */
const MAX_PARALLEL_CLAIMS = 2;

export class JobAbortedError extends Error {
  override name = 'JobAbortedError';
}

/**
 * Claims jobs in batches into a small local buffer, runs them up to
 * `concurrency` at once, and records each outcome through the schema's
 * functions. Claiming ahead by `prefetch` jobs means a finished handler starts
 * the next job without a round trip; the buffer is given back on shutdown.
 * Prefetch 'auto' claims ahead only while slots free up fast (AutoPrefetch).
 */
export class Worker {
  private readonly logger = new Logger('Stampeded');
  private readonly running = new Map<string, RunningJob>();
  /**
   * When each buffered job was claimed, by this process's clock. A job's
   * deadline counts from its claim, and the database's heartbeat_at says when
   * in the database's time: compared with Date.now() here, a host whose clock
   * ran ahead by more than expire_seconds timed out every job the moment it
   * started (and a smaller skew shortened every timeout by that much), so the
   * job ran again while its first run went on. Found by the fault suite's
   * skewed clocks (test/reliability/chaos.e2e-spec.ts).
   */
  private readonly claimedLocally = new WeakMap<Job, number>();
  /** Claim statements awaiting their answer. */
  private claimsInFlight = 0;
  /** A claim failed on its connection: it may have committed jobs that never reached us. */
  private unknownClaimsPossible = false;
  /** The latest claim time (database clock, ms) of any job a claim handed us. */
  private lastClaimAt = 0;
  private readonly buffer: Job[] = [];
  /** What every job's context asks of its run (see RunContext). */
  private readonly runHooks: JobRunHooks<RunningJob> = {
    signalOf: (entry) => this.signalOf(entry),
    onAlive: (entry) => this.armDeadline(entry, Date.now()),
    onLost: (entry, reason) => this.abandon(entry, 'lost', new JobAbortedError(reason)),
  };
  private readonly emptyQueues = new Set<string>();
  /** Where each queue's next claim starts (migration 10). */
  private readonly cursors = new Map<string, ClaimCursor>();
  private readonly recorder: OutcomeRecorder;
  private nextQueue = 0;
  private fetching?: Promise<void>;
  private wakeRequested = false;
  private stopping = false;
  /** Only a started worker claims on its own; drain() drives a worker that never starts. */
  private started = false;
  private pollTimer?: NodeJS.Timeout;
  private retryTimer?: NodeJS.Timeout;
  private claimFailures = 0;
  private sweepTimer?: NodeJS.Timeout;
  private readonly autoPrefetch: AutoPrefetch;

  constructor(
    private readonly db: StampededDatabase,
    private readonly tasks: TaskRegistry,
    private readonly events: JobEvents,
    private readonly config: WorkerConfig,
    private readonly processRunner?: ProcessTaskRunner,
  ) {
    this.recorder = new OutcomeRecorder(db, config.workerId, config.completionBatchSize);
    this.autoPrefetch = new AutoPrefetch(config.concurrency);
  }

  get workerId(): string {
    return this.config.workerId;
  }

  get runningCount(): number {
    return this.running.size;
  }

  start(): void {
    this.started = true;
    this.pollTimer = setInterval(() => {
      this.emptyQueues.clear();
      this.wake();
    }, this.config.pollIntervalMs);
    this.wake();
  }

  /** A job may be waiting: in this queue, or (no queue) anywhere. */
  wake(queue?: string): void {
    if (this.stopping || !this.started) return;
    if (queue !== undefined) {
      if (!this.config.queues.includes(queue)) return;
      this.emptyQueues.delete(queue);
    } else {
      this.emptyQueues.clear();
    }
    if (this.fetching) {
      this.wakeRequested = true;
      return;
    }
    this.fetching = this.fetchLoop().finally(() => (this.fetching = undefined));
  }

  private room(): number {
    return this.config.concurrency + this.prefetch() - this.running.size - this.buffer.length;
  }

  /** Jobs to hold claimed ahead of free slots. */
  private prefetch(): number {
    return this.config.prefetch === 'auto' ? this.autoPrefetch.size() : this.config.prefetch;
  }

  private queueRoom(queue: string): number {
    const cap = this.config.queueConcurrency.get(queue);
    // A paused queue has no room; a max_running queue has what the planner left free.
    const controlRoom = this.config.control ? this.config.control.room(queue, () => this.inFlight(queue)) : Infinity;
    if (cap === undefined) return controlRoom;
    return Math.min(controlRoom, cap - this.inFlight(queue));
  }

  private inFlight(queue: string): number {
    let used = 0;
    for (const r of this.running.values()) if (r.job.queue === queue) used++;
    for (const j of this.buffer) if (j.queue === queue) used++;
    return used;
  }

  private async fetchLoop(): Promise<void> {
    try {
      if (this.unknownClaimsPossible) await this.releaseUnknownClaims();
      do {
        this.wakeRequested = false;
        while (!this.stopping) {
          // Up to MAX_PARALLEL_CLAIMS claims at once when the buffer wants more
          // than one claim can take: a batch of no-op jobs runs in a
          // millisecond and its claim takes tens, so one claim at a time left
          // the worker idle most of the time (bench/RESULTS.md).
          const claims: Promise<void>[] = [];
          let reserved = 0;
          while (claims.length < MAX_PARALLEL_CLAIMS) {
            const queue = this.pickQueue(reserved);
            if (queue === undefined) break;
            const capped = this.config.queueConcurrency.has(queue) || this.config.control?.capped(queue) === true;
            if (claims.length > 0 && capped) break; // a per-queue cap is counted one claim at a time
            // At a trickle a second claim only races the first for the same few jobs.
            if (claims.length > 0 && this.prefetch() < this.config.claimBatchSize) break;
            const limit = Math.min(this.room() - reserved, this.queueRoom(queue), this.config.claimBatchSize);
            if (limit <= 0) break;
            reserved += limit;
            claims.push(this.claimInto(queue, limit));
            if (capped) break;
          }
          if (!claims.length) break;
          await Promise.all(claims);
        }
      } while (this.wakeRequested && !this.stopping);
      this.claimFailures = 0;
    } catch (err) {
      this.claimFailures++;
      const delay = Math.min(30_000, 200 * 2 ** Math.min(this.claimFailures, 8));
      if (this.claimFailures === 1 || this.claimFailures % 20 === 0) {
        const what = isConnectionError(err) ? 'the database is unreachable' : 'claiming failed';
        this.logger.warn(`${what} (${(err as Error)?.message ?? err}); trying again in ${delay} ms`);
      }
      clearTimeout(this.retryTimer);
      this.retryTimer = setTimeout(() => this.wake(), delay);
    }
  }

  /**
   * A claim whose answer was lost with its connection (a restarted server, a
   * cut connection) may have committed all the same: its jobs are ours in
   * the database and unknown here, and sat 'executing' until their
   * expire_seconds (an hour by default). Found by the fault suite's
   * PostgreSQL restart (test/reliability/chaos.e2e-spec.ts). Once the database answers
   * and no claim is in flight, they are given back without spending an
   * attempt. Only jobs claimed after the last one a claim handed us: a job
   * we did receive, whose outcome may still be on its way, is never among them.
   */
  private async releaseUnknownClaims(): Promise<void> {
    if (this.claimsInFlight > 0) return;
    const rows = await this.db.query<{ id: string; queue: string; attempt: number }>(UNKNOWN_CLAIMS, [
      this.config.workerId,
      new Date(this.lastClaimAt).toISOString(),
    ]);
    this.unknownClaimsPossible = false;
    const known = new Set([...this.running.keys(), ...this.buffer.map((j) => j.id)]);
    const unknown = rows.filter((r) => !known.has(r.id));
    if (!unknown.length) return;
    this.logger.warn(`giving back ${unknown.length} job(s) claimed by a statement whose answer was lost with its connection`);
    await Promise.all(unknown.map((r) => this.recorder.release({ id: r.id, queue: r.queue, attempt: r.attempt } as Job)));
  }

  /** Claims up to `limit` jobs of one queue into the buffer and starts what fits. */
  private async claimInto(queue: string, limit: number): Promise<void> {
    const jobs = await this.claim(queue, limit);
    if (jobs.length < limit) this.emptyQueues.add(queue);
    if (this.stopping) {
      // Claimed while shutdown began: give them straight back.
      await Promise.all(jobs.map((job) => this.giveBack(job)));
      return;
    }
    this.addToBuffer(queue, jobs);
    this.startBuffered();
  }

  /**
   * Adds one claim's jobs to the buffer, with that queue's buffered jobs in
   * the claim index's order, so that they start in the order the claim
   * promises. An UPDATE ... RETURNING hands its rows back in no promised
   * order, and a later claim may bring a job that ranks before one claimed
   * earlier: started as they came, a priority 5 job ran before a priority 0
   * one. The queue's jobs are sorted into the places its jobs already held,
   * so that the other queues keep their turns.
   */
  private addToBuffer(queue: string, jobs: Job[]): void {
    const places: number[] = [];
    const queued: Job[] = [];
    for (let i = 0; i < this.buffer.length; i++) {
      if (this.buffer[i].queue !== queue) continue;
      places.push(i);
      queued.push(this.buffer[i]);
    }
    for (const job of jobs) {
      places.push(this.buffer.length);
      queued.push(job);
      this.buffer.push(job);
    }
    queued.sort(byClaimOrder);
    for (let k = 0; k < places.length; k++) this.buffer[places[k]] = queued[k];
  }

  /** Round robin over the queues that may have work and have room (beyond `reserved` jobs being claimed). */
  private pickQueue(reserved = 0): string | undefined {
    if (this.room() - reserved <= 0) return undefined;
    const queues = this.config.queues;
    // A queue whose head waited past max_wait_secs is claimed from first, until it runs dry.
    const rushed = this.config.control?.rushed(queues).find((q) => !this.emptyQueues.has(q) && this.queueRoom(q) > 0);
    if (rushed !== undefined) return rushed;
    for (let i = 0; i < queues.length; i++) {
      const queue = queues[(this.nextQueue + i) % queues.length];
      if (this.emptyQueues.has(queue) || this.queueRoom(queue) <= 0) continue;
      this.nextQueue = (this.nextQueue + i + 1) % queues.length;
      return queue;
    }
    return undefined;
  }

  private cursorOf(queue: string): ClaimCursor {
    let cursor = this.cursors.get(queue);
    if (!cursor) this.cursors.set(queue, (cursor = new ClaimCursor()));
    return cursor;
  }

  async claim(queue: string, limit: number, now: Date | null = null): Promise<Job[]> {
    if (limit <= 0) return [];
    const workerId = this.config.workerId;
    // Before the statement is sent: the deadline errs early, never late.
    const sentAt = Date.now();
    // While tenants compete: a few jobs of each tenant with room here.
    const fair = this.config.control?.tenantClaim();
    // A claim on the database's clock may start from where the last ones
    // ended (ClaimCursor); one on a test clock, or a fair one, reads it all.
    const cursor = fair || now !== null ? undefined : this.cursorOf(queue);
    const after = cursor?.next() ?? null;
    let rows;
    this.claimsInFlight++;
    try {
      rows = fair
        ? await this.db.query(CLAIM_FAIR, [queue, workerId, limit, now, fair.tenants, fair.perTenant])
        : await this.db.query(CLAIM_BATCH, [queue, workerId, limit, now, after]);
    } catch (err) {
      if (isConnectionError(err)) this.unknownClaimsPossible = true;
      throw err;
    } finally {
      this.claimsInFlight--;
    }
    const jobs = rows.map((row) => toClaimedJob(row, workerId));
    if (cursor) {
      let latestDue: number | null = null;
      for (const job of jobs) if (latestDue === null || job.scheduledAt.getTime() > latestDue) latestDue = job.scheduledAt.getTime();
      const at = performance.now();
      cursor.record({ after, limit, taken: jobs.length, latestDue, tookMs: Date.now() - sentAt, at });
    }
    for (const job of jobs) {
      this.claimedLocally.set(job, sentAt);
      const claimedAt = job.claimedAt ? job.claimedAt.getTime() : 0;
      if (claimedAt > this.lastClaimAt) this.lastClaimAt = claimedAt;
    }
    this.config.control?.claimed(jobs);
    return jobs;
  }

  private startBuffered(): void {
    while (this.running.size < this.config.concurrency && this.buffer.length && !this.stopping) {
      // A buffered job whose tenant is at its share waits here for one of that
      // tenant's running jobs to finish, and the next tenant's job goes first.
      // Started in claim order, it was refused as `throttled` and sent back
      // with a delay: under a steady load of ten tenants half the claimed
      // jobs went round that loop, and the soak fell behind at 55 jobs/s of
      // 100 (it keeps up with fairness off).
      const gate = this.config.control;
      const index = gate ? this.buffer.findIndex((job) => gate.withinShare(job)) : 0;
      if (index < 0) break;
      void this.execute(this.buffer.splice(index, 1)[0]);
    }
    // Below half the buffer, claim more before the last buffered job starts.
    if (!this.stopping && !this.fetching && this.buffer.length <= this.prefetch() / 2) this.wake();
  }

  /** Runs one claimed job to its recorded outcome. */
  execute(job: Job): Promise<RunOutcome> {
    const entry: RunningJob = {
      job,
      controller: undefined,
      startedAt: Date.now(),
      settled: false,
      deadlineAt: Infinity,
      done: undefined as unknown as Promise<RunOutcome>,
    };
    this.running.set(job.id, entry);
    if (!this.sweepTimer) {
      this.sweepTimer = setInterval(() => this.sweepDeadlines(), DEADLINE_SWEEP_MS);
      this.sweepTimer.unref?.();
    }
    this.emit('active', job);
    const tracer = this.config.tracer;
    const run = tracer ? tracer.execute(job, this.config.workerId, () => this.run(entry)) : this.run(entry);
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

  /** The handler's AbortSignal, made when first asked for. */
  private signalOf(entry: RunningJob): AbortSignal {
    if (!entry.controller) {
      entry.controller = new AbortController();
      if (entry.abortedWith) entry.controller.abort(entry.abortedWith);
    }
    return entry.controller.signal;
  }

  private abortSignal(entry: RunningJob, error: Error): void {
    if (entry.controller) entry.controller.abort(error);
    else entry.abortedWith ??= error;
  }

  private sweepDeadlines(): void {
    const now = Date.now();
    for (const entry of this.running.values()) {
      if (!entry.settled && entry.deadlineAt <= now) void this.timeOut(entry);
    }
  }

  private async run(entry: RunningJob): Promise<RunOutcome> {
    const { job } = entry;
    const task = this.tasks.get(job.task);
    if (!task) {
      this.settle(entry);
      const error =
        `No handler for task "${job.task}" in this worker (pid ${process.pid}; tasks here: ${this.tasks.names().join(', ') || 'none'}). ` +
        `It will be retried: deploy a worker that has the task, or fix the task name.`;
      return this.recordFailure(job, this.handlerFailure({ job, error, kind: 'raised' }, undefined, error));
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
    this.armDeadline(entry, this.claimedLocally.get(job) ?? Date.now());
    const ctx = new RunContext(this.db, this.config.workerId, job, this.runHooks, entry);
    let result: unknown;
    try {
      result = await this.invoke(task, job, ctx, entry);
    } catch (err) {
      if (entry.settled) return entry.abortReason === 'cancelled' ? 'cancelled' : 'lost';
      this.settle(entry);
      if (entry.abortReason === 'shutdown') return this.giveBack(job);
      this.config.tracer?.raised(job, err);
      const error = describeError(err);
      const deferral = await this.config.control?.failed(job, err, error);
      const kind = (err as { workerExited?: boolean }).workerExited ? 'worker_exited' : 'raised';
      return this.recordFailure(job, deferral ?? this.handlerFailure({ job, error: err, kind }, task, error));
    }
    if (entry.settled) return entry.abortReason === 'cancelled' ? 'cancelled' : 'lost';
    this.settle(entry);
    const owned = await this.recorder.complete(job).catch((err: unknown) => {
      this.logger.error(`could not record completion of job ${job.id}: ${(err as Error).message}; it will run again when it expires`);
      return false;
    });
    this.emit(owned ? 'completed' : 'lost', job, { durationMs: Date.now() - entry.startedAt, result });
    if (owned) this.config.control?.completed(job);
    else this.config.control?.recorded(job);
    return owned ? 'completed' : 'lost';
  }

  private invoke(task: RegisteredTask, job: Job, ctx: RunContext<RunningJob>, entry: RunningJob): Promise<unknown> {
    if (task.metadata.isolation === 'process') {
      if (!this.processRunner) throw new Error('isolation: process is not available in this worker');
      return this.processRunner.run(task, job, ctx, this.signalOf(entry));
    }
    return Promise.resolve(task.instance.handle(job.args, ctx));
  }

  /** The failure to record, as the task's retry policy decides it. */
  private handlerFailure(failure: HandlerFailure, task: RegisteredTask | undefined, error: string): FailureRecord {
    return failureRecord(failure, decideRetry(failure, task?.retryPolicy), error);
  }

  private armDeadline(entry: RunningJob, from: number): void {
    if (entry.settled) return;
    entry.deadlineAt = from + entry.job.expireSeconds * 1000;
  }

  private async timeOut(entry: RunningJob): Promise<void> {
    if (entry.settled) return;
    const { job } = entry;
    const aborted = new JobAbortedError(`job ${job.id} exceeded expire_seconds (${job.expireSeconds}) without a touch`);
    this.abandon(entry, 'timed_out', aborted);
    const failure: HandlerFailure = { job, error: aborted, kind: 'timed_out' };
    await this.recordFailure(job, this.handlerFailure(failure, this.tasks.get(job.task), `exceeded expire_seconds (${job.expireSeconds}) without a touch`));
  }

  /** Frees the slot and fires the handler's signal; what follows depends on why. */
  private abandon(entry: RunningJob, reason: NonNullable<RunningJob['abortReason']>, error: JobAbortedError): void {
    if (entry.settled) return;
    entry.abortReason = reason;
    this.settle(entry);
    this.abortSignal(entry, error);
    if (reason === 'lost') this.emit('lost', entry.job, { error: error.message });
  }

  /**
   * This worker could not prove it is alive for long enough that the reaper
   * may give its jobs to another worker, or its row is already gone. Stop
   * them here first -- two executions of one job at once is worse than an
   * interrupted one -- and record `heartbeat_lost` for those still ours (an
   * interruption: the attempt budget is not the job's to lose for it).
   * Unstarted jobs go back as if never claimed.
   */
  async heartbeatLost(message: string): Promise<void> {
    const buffered = this.buffer.splice(0);
    const running = [...this.running.values()];
    if (running.length || buffered.length) {
      this.logger.warn(`${message}: stopping ${running.length} running job(s) and giving back ${buffered.length} unstarted`);
    }
    const failures = running.map((entry): HandlerFailure => {
      const aborted = new JobAbortedError(message);
      entry.abortReason = 'lost';
      this.settle(entry);
      this.abortSignal(entry, aborted);
      return { job: entry.job, error: aborted, kind: 'heartbeat_lost' };
    });
    await Promise.all([
      ...buffered.map((job) => this.giveBack(job)),
      ...failures.map((failure) => this.recordFailure(failure.job, this.handlerFailure(failure, this.tasks.get(failure.job.task), message))),
    ]);
  }

  /** The job was cancelled (by anyone): stop running it; the database already says cancelled. */
  cancelled(jobId: string): void {
    const entry = this.running.get(jobId);
    if (entry) {
      this.abandon(entry, 'cancelled', new JobAbortedError(`job ${jobId} was cancelled`));
      this.emit('cancelled', entry.job);
      return;
    }
    const index = this.buffer.findIndex((j) => j.id === jobId);
    if (index >= 0) this.emit('cancelled', this.buffer.splice(index, 1)[0]);
  }

  private settle(entry: RunningJob): void {
    if (entry.settled) return;
    entry.settled = true;
    this.running.delete(entry.job.id);
    this.autoPrefetch.slotFreed();
    this.config.control?.settled(entry.job);
    if (this.running.size === 0 && this.sweepTimer) {
      clearInterval(this.sweepTimer);
      this.sweepTimer = undefined;
    }
    this.startBuffered();
  }

  private async recordFailure(job: Job, failure: FailureRecord): Promise<RunOutcome> {
    const result = await this.recorder.fail(job, failure).catch((err: unknown) => {
      this.logger.error(`could not record failure of job ${job.id}: ${(err as Error).message}; it will run again when it expires`);
      return { owned: false } as const;
    });
    this.config.control?.recorded(job);
    if (!result.owned) {
      this.emit('lost', job, { error: failure.error, failureKind: failure.kind });
      return 'lost';
    }
    const detail = { error: failure.error, failureKind: failure.kind };
    this.emit('failed', job, detail);
    if (result.state === 'retryable') {
      this.emit('retrying', job, { ...detail, retryDelayMs: failure.retryDelayMs ?? undefined });
      return 'retrying';
    }
    this.emit('discarded', job, { ...detail, deadLettered: result.deadLettered });
    return 'discarded';
  }

  private async giveBack(job: Job): Promise<RunOutcome> {
    const owned = await this.recorder.release(job).catch(() => false);
    this.emit(owned ? 'released' : 'lost', job);
    return owned ? 'released' : 'lost';
  }

  private emit(type: JobEventType, job: Job, extra?: Partial<JobEvent>): void {
    this.config.tracer?.observe(type, job, extra ?? {});
    if (this.events.observed) this.events.emit({ type, job, workerId: this.config.workerId, ...extra });
  }

  /**
   * Stops claiming, gives back what was claimed but not started, lets running
   * handlers finish for up to `timeoutMs`, then aborts the rest and gives them
   * back too -- interrupted by us, not failed -- so nothing waits for the reaper.
   */
  async stop(timeoutMs: number, abortGraceMs = 2000): Promise<void> {
    this.stopping = true;
    clearInterval(this.pollTimer);
    clearTimeout(this.retryTimer);
    await this.fetching;
    await Promise.all(this.buffer.splice(0).map((job) => this.giveBack(job)));
    await this.waitForRunning(timeoutMs);
    const stragglers = [...this.running.values()];
    if (stragglers.length) {
      this.logger.warn(`shutdown: aborting ${stragglers.length} job(s) still running after ${timeoutMs} ms; they go back to the queue`);
      for (const entry of stragglers) {
        entry.abortReason = 'shutdown';
        this.abortSignal(entry, new JobAbortedError('worker is shutting down'));
      }
      await this.waitForRunning(abortGraceMs);
      for (const entry of [...this.running.values()]) {
        this.settle(entry);
        await this.giveBack(entry.job);
      }
    }
    await this.recorder.settle();
  }

  private async waitForRunning(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.running.size && Date.now() < deadline) {
      const pending = [...this.running.values()].map((r) => r.done);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled(pending),
        new Promise((r) => (timer = setTimeout(r, Math.max(0, deadline - Date.now())))),
      ]);
      clearTimeout(timer);
    }
  }
}

/** The claim index's order, (priority, scheduled_at); the sort is stable, so ties keep the claim's order. */
function byClaimOrder(a: Job, b: Job): number {
  return a.priority - b.priority || a.scheduledAt.getTime() - b.scheduledAt.getTime();
}
