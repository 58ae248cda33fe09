import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import type { LogLimits } from '../explorer/task.registry.js';
import type { Job } from '../interfaces/job.interface.js';
import { LOG_LINES } from '../sql/job-logs.sql.js';
import { PROGRESS_INTERVAL_MS } from './progress-reporter.js';
import { ReportSchedule } from './report-schedule.js';
import { LIMITS } from '../stampeded.constants.js';

const utf8 = new TextEncoder();

/**
 * A ctx.log() message as its line is stored: text (anything else through
 * String()), a NUL, which PostgreSQL's text cannot hold, replaced, and cut
 * to `maxBytes` of UTF-8 with a note of its size when longer.
 */
export function logLineText(message: unknown, maxBytes: number): string {
  let text = typeof message === 'string' ? message : String(message);
  if (text.includes('\u0000')) text = text.replaceAll('\u0000', '\uFFFD');
  // A UTF-16 unit is at most three bytes of UTF-8: most lines need no count.
  if (text.length * 3 <= maxBytes) return text;
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes <= maxBytes) return text;
  const note = ` … [cut from ${bytes} bytes]`;
  // encodeInto() stops before a character that does not fit whole.
  const { read } = utf8.encodeInto(text, new Uint8Array(Math.max(0, maxBytes - Buffer.byteLength(note, 'utf8'))));
  return `${text.slice(0, read)}${note}`;
}

/**
 * The longest JSON string of a line whose envelope fits the column
 * (LIMITS.logLineBytes): the envelope holds it in base64, 4 bytes for 3,
 * beside under 200 bytes of its other fields.
 */
const SEALED_JSON_BYTES = Math.floor((LIMITS.logLineBytes - 256) / 4) * 3;

/**
 * logLineText() for a line that is sealed (an encrypted job's): cut, too,
 * so that its JSON string, whose escapes can take more bytes than the
 * line, fits its envelope in the column.
 */
export function sealableLineText(message: unknown, maxBytes: number): string {
  let max = Math.min(maxBytes, SEALED_JSON_BYTES);
  for (;;) {
    const text = logLineText(message, max);
    const json = Buffer.byteLength(JSON.stringify(text), 'utf8');
    if (json <= SEALED_JSON_BYTES) return text;
    max = Math.floor((max * SEALED_JSON_BYTES) / json) - 64;
  }
}

/** Lines waiting for a write, oldest first, and how many were dropped before them. */
interface Lines {
  at: Date[];
  messages: string[];
  dropped: number;
}

/** Drops the oldest lines past `max`, counting them. */
function keepNewest(lines: Lines, max: number): Lines {
  const over = lines.messages.length - max;
  if (over > 0) {
    lines.at.splice(0, over);
    lines.messages.splice(0, over);
    lines.dropped += over;
  }
  return lines;
}

/**
 * Writes one run's ctx.log() lines in batches, on progress's schedule (at
 * most once per PROGRESS_INTERVAL_MS, the last lines by flush() before the
 * run's outcome), fenced by (claimed_by, attempt) in SQL
 * (functions/stampeded_log_lines.sql). A batch holds at most the task's
 * logs.maxLines, the newest: a handler that logs faster drops its older
 * lines here, counted, and its write costs what a full batch costs.
 *
 * The lines of a job whose args are encrypted are sealed as its args are
 * (`seal`), each cut first to what fits the column once sealed.
 *
 * Best effort: a write the database refuses to take (a dropped connection)
 * is logged, and its lines go with the next; it never fails the job. A write
 * is not a touch: a handler logging does not say it is alive.
 */
export class LogReporter {
  private readonly logger = new Logger('Stampeded');
  private readonly schedule: ReportSchedule<Lines>;

  constructor(
    private readonly db: StampededDatabase,
    private readonly workerId: string,
    private readonly job: Job,
    private readonly limits: LogLimits,
    /** A write found the job no longer ours. */
    private readonly onLost: (reason: string) => void,
    intervalMs = PROGRESS_INTERVAL_MS,
    /** A line as its encrypted job stores it; none for a job stored in plaintext. */
    private readonly seal?: (line: string) => string,
  ) {
    this.schedule = new ReportSchedule(
      {
        write: (lines) => this.write(lines),
        putBack: (failed, since) =>
          keepNewest(
            since ? { at: [...failed.at, ...since.at], messages: [...failed.messages, ...since.messages], dropped: failed.dropped + since.dropped } : failed,
            limits.maxLines,
          ),
      },
      intervalMs,
    );
  }

  /** Adds a line to the next write, written at `at`: now, or when an isolated child process wrote it. */
  log(message: unknown, at = new Date()): void {
    const lines = this.schedule.waiting ?? { at: [], messages: [], dropped: 0 };
    lines.at.push(at);
    lines.messages.push(this.seal ? sealableLineText(message, this.limits.maxLineBytes) : logLineText(message, this.limits.maxLineBytes));
    void this.schedule.report(keepNewest(lines, this.limits.maxLines));
  }

  /** Writes the lines still waiting and ends the reporter: called before the run's outcome is recorded. */
  flush(): Promise<void> {
    return this.schedule.flush();
  }

  /** Ends the reporter without writing what waits: the job is no longer ours. */
  stop(): void {
    this.schedule.stop();
  }

  private async write(lines: Lines): Promise<boolean | undefined> {
    let rows: { owned: boolean | null }[];
    try {
      rows = await this.db.query<{ owned: boolean | null }>(LOG_LINES, [
        this.job.queue,
        this.job.id,
        this.workerId,
        this.job.attempt,
        lines.at,
        this.seal ? lines.messages.map(this.seal) : lines.messages,
        lines.dropped,
        this.limits.maxLines,
      ]);
    } catch (err) {
      this.logger.warn(
        `job ${this.job.id} (${this.job.task}): ${lines.messages.length} log line(s) not written (${(err as Error).message}); they go with the next write`,
      );
      return undefined;
    }
    if (rows[0]?.owned) return true;
    this.onLost('a log write found the job no longer owned by this worker');
    return false;
  }
}
