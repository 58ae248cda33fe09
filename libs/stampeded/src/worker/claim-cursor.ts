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
 * runAt, or given back with its old due time) waits for the next full claim,
 * at most FULL_CLAIM_EVERY_MS. When a full claim is fast again, the cursor is
 * dropped.
 */
export class ClaimCursor {
  private after: number | null = null;
  private lastFullAt = -Infinity;

  /** The `after` of the next claim, epoch milliseconds, or null for a full claim. */
  next(now: number = performance.now()): number | null {
    if (this.after === null || now - this.lastFullAt >= FULL_CLAIM_EVERY_MS) return null;
    return this.after;
  }

  record(found: ClaimFound): void {
    const emptied = found.taken < found.limit;
    if (found.after === null) {
      this.lastFullAt = found.at;
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
