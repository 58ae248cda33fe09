import type { Job } from '../interfaces/job.interface.js';
import type { RunReports } from './run-reports.js';
import type { OpenedArgs } from '../encryption/job-encryption.js';
import type { RunOutcome } from './job-executor.js';
import type { RunningChunk } from './chunks.js';

/** One job running in this worker, from its start to its recorded outcome. */
export interface RunningJob {
  job: Job;
  /**
   * Made on first use of the handler's signal. Most handlers never look at
   * it, and an AbortController per job is a measurable share of a no-op
   * job's cost (bench/RESULTS.md).
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
  /** Made on the handler's first ctx.progress() or ctx.log(): most call neither. */
  reports?: RunReports;
  /** Whether its args were stored encrypted or its task or queue encrypts, and why they could not be opened, if so. */
  sealing: OpenedArgs;
  /** The chunk it belongs to, for a chunked task's job. */
  chunk?: RunningChunk;
  done: Promise<RunOutcome>;
}

/**
 * Deadlines are checked by one sweep over the running jobs, not by a timer
 * per job: arming and clearing a setTimeout for every job costs more than a
 * no-op job itself. A job times out at most this late.
 */
const DEADLINE_SWEEP_MS = 100;

/**
 * The jobs running in one worker (JobExecutor): each one's deadline, watched
 * by one sweep while any runs, and each one's AbortSignal, made when first
 * asked for. `onDeadline` hears of a job whose deadline passed.
 */
export class RunningJobs {
  private readonly entries = new Map<string, RunningJob>();
  private sweepTimer?: NodeJS.Timeout;

  constructor(private readonly onDeadline: (entry: RunningJob) => void) {}

  get size(): number {
    return this.entries.size;
  }

  get(jobId: string): RunningJob | undefined {
    return this.entries.get(jobId);
  }

  all(): RunningJob[] {
    return [...this.entries.values()];
  }

  /** How many run of the queue. */
  countIn(queue: string): number {
    let n = 0;
    for (const r of this.entries.values()) if (r.job.queue === queue) n++;
    return n;
  }

  /** A job starts running: no deadline until one is armed. */
  add(job: Job, sealing: OpenedArgs): RunningJob {
    const entry: RunningJob = {
      job,
      controller: undefined,
      startedAt: Date.now(),
      settled: false,
      deadlineAt: Infinity,
      sealing,
      done: undefined as unknown as Promise<RunOutcome>,
    };
    this.entries.set(job.id, entry);
    if (!this.sweepTimer) {
      this.sweepTimer = setInterval(() => this.sweep(), DEADLINE_SWEEP_MS);
      this.sweepTimer.unref?.();
    }
    return entry;
  }

  /** The job left its slot. */
  remove(entry: RunningJob): void {
    this.entries.delete(entry.job.id);
    if (this.entries.size === 0 && this.sweepTimer) {
      clearInterval(this.sweepTimer);
      this.sweepTimer = undefined;
    }
  }

  /** The handler's AbortSignal, made when first asked for. */
  signalOf(entry: RunningJob): AbortSignal {
    if (!entry.controller) {
      entry.controller = new AbortController();
      if (entry.abortedWith) entry.controller.abort(entry.abortedWith);
    }
    return entry.controller.signal;
  }

  abort(entry: RunningJob, error: Error): void {
    if (entry.controller) entry.controller.abort(error);
    else entry.abortedWith ??= error;
  }

  /** The job times out `expireSeconds` after `from` unless it touches again. */
  armDeadline(entry: RunningJob, from: number): void {
    if (entry.settled) return;
    entry.deadlineAt = from + entry.job.expireSeconds * 1000;
  }

  /** Resolves when every running job has its outcome, or after `timeoutMs`. */
  async settledWithin(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.entries.size && Date.now() < deadline) {
      const pending = [...this.entries.values()].map((r) => r.done);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.allSettled(pending), new Promise((r) => (timer = setTimeout(r, Math.max(0, deadline - Date.now()))))]);
      clearTimeout(timer);
    }
  }

  private sweep(): void {
    const now = Date.now();
    for (const entry of this.entries.values()) {
      if (!entry.settled && entry.deadlineAt <= now) this.onDeadline(entry);
    }
  }
}
