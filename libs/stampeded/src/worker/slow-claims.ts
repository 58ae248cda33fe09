import type { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import type { Job } from '../interfaces/job.interface.js';
import { OLDEST_SNAPSHOT } from '../sql/workers.sql.js';
import { CLAIM_CURSOR_HELD, CLAIM_CURSOR_OFF, CLAIM_CURSOR_ON } from '../stampeded.messages.js';
import { ClaimCursor } from './claim-cursor.js';

/** A snapshot held this long when claims turn slow is named in a warning. */
const HELD_SNAPSHOT_WARN_S = 5;
/** At most one such warning per queue in this long. */
const WARN_EVERY_MS = 60_000;

/** What one plain claim did, for its queue's cursor. */
export interface PlainClaimDone {
  /** The cursor it was given, null for a full claim. */
  after: number | null;
  limit: number;
  jobs: readonly Job[];
  tookMs: number;
}

/**
 * What a worker does while a queue's plain claims are slow (NOTES.md, "The
 * claim cursor"): per queue, where its claims start (ClaimCursor), kept from
 * what each claim took and how long it took; the full claim that cursor mode
 * still makes, run beside the claims from the cursor; and what the operator
 * is told when claims turn slow and when they are fast again. A snapshot
 * held open for a while is worth a warning, naming its session; slow claims
 * without one (a busy machine) are only a debug line.
 */
export class SlowClaims {
  private readonly cursors = new Map<string, ClaimCursor>();
  /** When this process last warned of a queue's slow claims. */
  private readonly warnedAt = new Map<string, number>();
  /** Queues warned of, whose return to full claims is logged too. */
  private readonly warned = new Set<string>();
  /** Full claims running beside the cursor's claims, by queue. */
  private readonly fullClaims = new Map<string, Promise<void>>();

  /** `claimFull`: claims the queue from the head of the claim index, and buffers what it took. */
  constructor(
    private readonly db: StampededDatabase,
    private readonly logger: Logger,
    private readonly claimFull: (queue: string) => Promise<void>,
  ) {}

  /**
   * Where the queue's next plain claim starts, epoch milliseconds on the
   * database's clock; null: from the head. In cursor mode, a full claim that
   * is due runs beside this claim (when `beside`: not for a capped queue,
   * whose claims are counted one at a time) rather than in its place: it
   * walks every dead entry a held snapshot keeps at the head of the claim
   * index, and jobs due meanwhile are taken from the cursor instead of
   * waiting for that walk.
   */
  from(queue: string, beside: boolean): number | null {
    const cursor = this.cursorOf(queue);
    const after = cursor.next();
    if (after !== null || cursor.current() === null || !beside) return after;
    if (!this.fullClaims.has(queue)) {
      cursor.fullStarted();
      const run = this.claimFull(queue)
        // The claims from the cursor go on; the next full claim is due as usual.
        .catch((err) => this.logger.debug(`a full claim of ${queue} failed: ${(err as Error)?.message ?? err}`))
        .finally(() => this.fullClaims.delete(queue));
      this.fullClaims.set(queue, run);
    }
    return cursor.current();
  }

  /** A plain claim of the queue came back: its cursor learns from it, and a turn to the cursor or back is reported. */
  record(queue: string, claim: PlainClaimDone): void {
    const cursor = this.cursorOf(queue);
    let latestDue: number | null = null;
    for (const job of claim.jobs) if (latestDue === null || job.scheduledAt.getTime() > latestDue) latestDue = job.scheduledAt.getTime();
    const wasOn = cursor.current() !== null;
    cursor.record({ after: claim.after, limit: claim.limit, taken: claim.jobs.length, latestDue, tookMs: claim.tookMs, at: performance.now() });
    if (!wasOn && cursor.current() !== null) void this.turnedSlow(queue, claim.tookMs, claim.jobs.length);
    else if (wasOn && cursor.current() === null) this.turnedFast(queue);
  }

  /** Waits for the full claims under way. */
  async settle(): Promise<void> {
    await Promise.all(this.fullClaims.values());
  }

  private cursorOf(queue: string): ClaimCursor {
    let cursor = this.cursors.get(queue);
    if (!cursor) this.cursors.set(queue, (cursor = new ClaimCursor()));
    return cursor;
  }

  private async turnedSlow(queue: string, tookMs: number, taken: number): Promise<void> {
    const last = this.warnedAt.get(queue);
    if (last !== undefined && performance.now() - last < WARN_EVERY_MS) return;
    try {
      const [holder] = await this.db.query<{ pid: number; application: string; state: string; seconds: number }>(OLDEST_SNAPSHOT);
      if (holder && holder.seconds >= HELD_SNAPSHOT_WARN_S) {
        this.warnedAt.set(queue, performance.now());
        this.warned.add(queue);
        this.logger.warn(CLAIM_CURSOR_HELD(queue, tookMs, taken, holder));
        return;
      }
    } catch (err) {
      this.logger.debug(`could not read pg_stat_activity: ${(err as Error)?.message ?? err}`);
    }
    this.logger.debug(CLAIM_CURSOR_ON(queue, tookMs, taken));
  }

  /** Said where the turn to the cursor was. */
  private turnedFast(queue: string): void {
    if (this.warned.delete(queue)) this.logger.log(CLAIM_CURSOR_OFF(queue));
    else this.logger.debug(CLAIM_CURSOR_OFF(queue));
  }
}
