import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import { ProgressError } from '../errors/stampeded.errors.js';
import type { Job, JobProgress } from '../interfaces/job.interface.js';
import { toJsonText } from '../queue/job-input.validator.js';
import { LIMITS } from '../stampeded.constants.js';
import { PROGRESS_NOT_STORABLE, PROGRESS_TOO_LARGE } from '../stampeded.messages.js';
import { PROGRESS, PROGRESS_NOTIFY } from '../sql/jobs.sql.js';
import { ReportSchedule } from './report-schedule.js';

/**
 * The most often one job's progress is written. A handler that reports in a
 * tight loop would otherwise rewrite its row (a new version of a 250-byte row
 * and its WAL) per call; a person watching a page, or an API polling for the
 * job, sees nothing finer than a second anyway.
 */
export const PROGRESS_INTERVAL_MS = 1000;

/** What a reporter tells the run it belongs to. */
export interface ProgressHooks {
  /** A write found the job still ours: it counts as a touch. */
  onAlive(): void;
  /** A write found the job no longer ours. */
  onLost(reason: string): void;
  /** A value was written. */
  onWritten(progress: JobProgress): void;
}

/** The progress a handler gave, as the JSON text the column stores; throws ProgressError for anything else. */
export function progressText(value: unknown): string {
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new ProgressError(PROGRESS_NOT_STORABLE(`got ${value}, which JSON cannot represent`));
    return JSON.stringify(value);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ProgressError(
      PROGRESS_NOT_STORABLE(`got ${Array.isArray(value) ? 'an array' : value === null ? 'null' : typeof value}; wrap it: { value: ... }`),
    );
  }
  const text = toJsonText(value, 'progress', (path, problem) => {
    throw new ProgressError(PROGRESS_NOT_STORABLE(`${path} ${problem}`));
  });
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > LIMITS.progressBytes) throw new ProgressError(PROGRESS_TOO_LARGE(bytes, LIMITS.progressBytes));
  return text;
}

interface Pending {
  text: string;
  value: JobProgress;
}

/**
 * Writes one run's progress, at most once per PROGRESS_INTERVAL_MS
 * (ReportSchedule), fenced by (claimed_by, attempt) in SQL
 * (functions/stampeded_progress.sql): the last value wins, and flush()
 * writes the value still waiting before the run's outcome is recorded.
 *
 * Best effort: a write the database refuses to take (a dropped connection)
 * is logged, and its value goes with the next one unless a newer one came;
 * it never fails the job.
 */
export class ProgressReporter {
  private readonly logger = new Logger('Stampeded');
  private readonly schedule: ReportSchedule<Pending>;

  constructor(
    private readonly db: StampededDatabase,
    private readonly workerId: string,
    private readonly job: Job,
    private readonly hooks: ProgressHooks,
    intervalMs = PROGRESS_INTERVAL_MS,
    /** Where the fleet hears of a value written, while someone listens (see OutcomeRecorder). */
    private readonly eventsChannel: () => string | undefined = () => undefined,
  ) {
    this.schedule = new ReportSchedule({ write: (next) => this.write(next), putBack: (failed, since) => since ?? failed }, intervalMs);
  }

  /**
   * Resolves true when the value was written or will be with the next
   * write, false when the job is no longer this worker's (nothing is
   * written then, nor afterwards).
   */
  report(text: string, value: JobProgress): Promise<boolean> {
    return this.schedule.report({ text, value });
  }

  /** Writes the value still waiting, if any, and ends the reporter: called before the run's outcome is recorded. */
  flush(): Promise<void> {
    return this.schedule.flush();
  }

  /** Ends the reporter without writing what waits: the job is no longer ours. */
  stop(): void {
    this.schedule.stop();
  }

  private async write(next: Pending): Promise<boolean | undefined> {
    let rows: { owned: boolean | null }[];
    try {
      const values = [this.job.queue, this.job.id, this.workerId, this.job.attempt, next.text];
      const channel = this.eventsChannel();
      rows =
        channel === undefined
          ? await this.db.query<{ owned: boolean | null }>(PROGRESS, values)
          : await this.db.query<{ owned: boolean | null }>(PROGRESS_NOTIFY, [...values, this.job.task, channel]);
    } catch (err) {
      this.logger.warn(`job ${this.job.id} (${this.job.task}): progress not written (${(err as Error).message}); it goes with the next report`);
      return undefined;
    }
    if (!rows[0]?.owned) {
      this.hooks.onLost('progress found the job no longer owned by this worker');
      return false;
    }
    this.hooks.onAlive();
    this.hooks.onWritten(next.value);
    return true;
  }
}
