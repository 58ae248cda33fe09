import { Logger } from '@nestjs/common';
import type { ControlGate } from '../control/control.gate.js';
import type { Job } from '../interfaces/job.interface.js';
import { LATE_STARTS_GIVEN_BACK } from '../stampeded.messages.js';

/** At most one warning of late starts per queue in this long. */
const LATE_STARTS_WARN_EVERY_MS = 60_000;

/**
 * The promise a rate-limited claim makes: each of its jobs starts within
 * the limit's grace of the claim, or not at all (START_GRACE in
 * control/control.config.ts has why the limit needs it). Asked just before
 * the handler is called; a job it refuses is given back.
 */
export class StartGrace {
  private readonly logger = new Logger('Stampeded');
  /** Per queue, late jobs since its last warning, and when that was (performance.now()). */
  private readonly late = new Map<string, { count: number; warnedAt: number }>();

  constructor(private readonly control: ControlGate | undefined) {}

  /**
   * Whether the job is past its grace, counted from `countedAt`
   * (performance.now(), no later than its claim counted it in its windows). A job with no claim time (drain() runs each job as it
   * claims it) or of a queue with no rate limit has none.
   */
  passed(job: Job, countedAt: number | undefined): boolean {
    const graceMs = this.control?.startGraceMs(job.queue);
    if (graceMs === undefined || countedAt === undefined) return false;
    const now = performance.now();
    if (now - countedAt <= graceMs) return false;
    this.logger.debug(
      `job ${job.id} of queue "${job.queue}": ${Math.round(now - countedAt)} ms after its claim, past its ${graceMs} ms to start; giving it back`,
    );
    const late = this.late.get(job.queue) ?? { count: 0, warnedAt: -Infinity };
    late.count++;
    if (now - late.warnedAt >= LATE_STARTS_WARN_EVERY_MS) {
      this.logger.warn(LATE_STARTS_GIVEN_BACK(job.queue, late.count, graceMs));
      late.count = 0;
      late.warnedAt = now;
    }
    this.late.set(job.queue, late);
    return true;
  }
}
