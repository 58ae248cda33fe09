/**
 * A full claim that found the queue empty, or nearly, and took longer than
 * this (plus PER_JOB_MS for each job it took) walked a head of the claim
 * index full of dead entries: the sign of a snapshot held open somewhere. A
 * claim of a few jobs from a clean index takes a small fraction of this
 * (NOTES.md, "The claim cursor").
 */
const SLOW_MS = 12;
const PER_JOB_MS = 0.05;
/**
 * The cursor trails the latest due time claimed by this much: a job inserted
 * by a transaction that began up to this long before it committed is still
 * found. Each claim in cursor mode reads this much of the queue's history
 * again (at 4,000 jobs a second, 800 dead entries).
 */
const MARGIN_MS = 200;
/** In cursor mode, a full claim at least this often: what the cursor passed by is found within it. */
const FULL_CLAIM_EVERY_MS = 1000;
/**
 * ...and no more often than keeps full claims to this share of the time: a
 * full claim walks every dead entry the held snapshot keeps, so its cost
 * grows with the snapshot's age (about 120 ms for the 360,000 entries of
 * 90 s at 4,000 jobs a second, bench/RESULTS.md; ten minutes leave
 * 2,400,000), and once a second it would take a core to itself.
 */
const FULL_CLAIM_SHARE = 0.1;

export interface ClaimFound {
  /** The cursor the claim was given (from next()), null for a full claim. */
  after: number | null;
  limit: number;
  taken: number;
  /** The latest due time among the jobs taken, epoch milliseconds on the database's clock. */
  latestDue: number | null;
  tookMs: number;
  /** performance.now() when the claim came back. */
  at: number;
}

/**
 * Where the next claim of one queue starts. Normally every claim is a full
 * claim (from the head of the claim index). While full claims are slow, claims
 * start from a cursor: the latest due time a claim that emptied the queue
 * took, less a margin. A claim that takes fewer jobs than it asked for
 * claimed every job its snapshot could see, so nothing visible is left before
 * that time. A job that appears before the cursor later (inserted with a past
 * runAt, or given back with its old due time) waits for the next full claim:
 * FULL_CLAIM_EVERY_MS, or ten times the last full claim's duration when
 * that is longer (FULL_CLAIM_SHARE). When a full claim is fast again, the
 * cursor is dropped.
 */
export class ClaimCursor {
  private after: number | null = null;
  private lastFullAt = -Infinity;
  private lastFullTookMs = 0;

  /** The `after` of the next claim, epoch milliseconds, or null for a full claim. */
  next(now: number = performance.now()): number | null {
    if (this.after === null || this.fullDue(now)) return null;
    return this.after;
  }

  /** In cursor mode, the cursor to claim from while a full claim runs beside it (SlowClaims.from()); null outside it. */
  current(): number | null {
    return this.after;
  }

  /** In cursor mode: a full claim is due, to find what the cursor passed by. */
  fullDue(now: number = performance.now()): boolean {
    if (this.after === null) return false;
    return now - this.lastFullAt >= Math.max(FULL_CLAIM_EVERY_MS, this.lastFullTookMs / FULL_CLAIM_SHARE);
  }

  /** A full claim is under way from `at`: no other is due until it has been recorded. */
  fullStarted(at: number = performance.now()): void {
    this.lastFullAt = at;
  }

  record(found: ClaimFound): void {
    const emptied = found.taken < found.limit;
    if (found.after === null) {
      this.lastFullAt = found.at;
      this.lastFullTookMs = found.tookMs;
      const slow = found.tookMs > SLOW_MS + PER_JOB_MS * found.taken;
      if (!slow) {
        this.after = null;
        return;
      }
      // Slow, but it did not reach the end of what was due: no cursor can be
      // set from it; keep the one there is.
      if (!emptied || found.latestDue === null) return;
    } else if (!emptied || found.latestDue === null) {
      return;
    }
    const candidate = found.latestDue - MARGIN_MS;
    this.after = this.after === null ? candidate : Math.max(this.after, candidate);
  }
}
