import type { StampededDatabase } from '../database/stampeded-database.js';
import type { LogLimits } from '../explorer/task.registry.js';
import type { Job, JobProgress } from '../interfaces/job.interface.js';
import { LogReporter } from './log-reporter.js';
import { PROGRESS_INTERVAL_MS, ProgressReporter } from './progress-reporter.js';

/** What a run's reports tell the run they belong to. */
export interface RunReportHooks {
  /** A progress write found the job still ours: it counts as a touch. */
  onAlive(): void;
  /** A write found the job no longer ours. */
  onLost(reason: string): void;
  /** A progress value was written. */
  onProgress(progress: JobProgress): void;
}

/**
 * What one run's handler reports while it runs: its progress (ctx.progress())
 * and its log lines (ctx.log()), each written on its own schedule and made
 * on first use, since most handlers report neither. flush() writes what
 * waits of both before the run's outcome is recorded; stop() drops it, the
 * job being no longer this worker's.
 */
export class RunReports {
  private progressReporter?: ProgressReporter;
  private logReporter?: LogReporter;

  constructor(
    private readonly db: StampededDatabase,
    private readonly workerId: string,
    private readonly job: Job,
    private readonly logLimits: LogLimits,
    private readonly hooks: RunReportHooks,
    private readonly eventsChannel?: () => string | undefined,
    /** A log line as an encrypted job stores it: see LogReporter. */
    private readonly sealLine?: (line: string) => string,
  ) {}

  /** ctx.progress(), its value already checked: see ProgressReporter. */
  progress(text: string, value: JobProgress): Promise<boolean> {
    this.progressReporter ??= new ProgressReporter(
      this.db,
      this.workerId,
      this.job,
      { onAlive: () => this.hooks.onAlive(), onLost: (reason) => this.hooks.onLost(reason), onWritten: (progress) => this.hooks.onProgress(progress) },
      PROGRESS_INTERVAL_MS,
      this.eventsChannel,
    );
    return this.progressReporter.report(text, value);
  }

  /** ctx.log(): see LogReporter. */
  log(message: unknown, at?: Date): void {
    this.logReporter ??= new LogReporter(
      this.db,
      this.workerId,
      this.job,
      this.logLimits,
      (reason) => this.hooks.onLost(reason),
      PROGRESS_INTERVAL_MS,
      this.sealLine,
    );
    this.logReporter.log(message, at);
  }

  async flush(): Promise<void> {
    await Promise.all([this.progressReporter?.flush(), this.logReporter?.flush()]);
  }

  stop(): void {
    this.progressReporter?.stop();
    this.logReporter?.stop();
  }
}
