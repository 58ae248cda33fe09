/**
 * The buffer holds about this much work at the measured rate: enough that a
 * claim round trip never leaves a slot idle, little enough that jobs do not
 * wait long claimed but not started.
 */
const WINDOW_MS = 200;
/**
 * The most jobs claimed ahead: one claim statement's worth. Jobs held longer
 * than a young-generation cycle are promoted and left to full collections, so
 * a larger buffer costs memory and gains no speed (bench/RESULTS.md).
 */
const MAX = 500;
/**
 * The rate is measured at most this often, and a measurement counts half as
 * much for each of these that passed since.
 */
const HALF_LIFE_MS = 100;

/**
 * Sizes prefetch 'auto': how many jobs to hold claimed ahead of free slots,
 * from the rate at which this worker's slots free up (a buffered job is
 * wanted when a slot frees, so that rate is what the buffer has to cover).
 *
 * While slots free up slower than one per slot per window, nothing is claimed
 * ahead. A claim when a slot frees costs little beside jobs that long, and a
 * job held in the buffer starts before any better job enqueued while it
 * waits: with one long job running at concurrency 1, a priority 5 job claimed
 * ahead would run before a priority 0 job enqueued after it. Without a
 * buffer, the next job is whichever the claim index ranks first when the
 * slot frees.
 */
export class AutoPrefetch {
  private freed = 0;
  private since?: number;
  private freedAtSince = 0;
  private perMs = 0;

  constructor(private readonly concurrency: number) {}

  /** A running job gave its slot back, however it ended. */
  slotFreed(): void {
    this.freed++;
  }

  /** Jobs to hold claimed ahead of free slots; `now` is performance.now(). */
  size(now: number = performance.now()): number {
    if (this.since === undefined) {
      this.since = now;
    } else if (now - this.since >= HALF_LIFE_MS) {
      const elapsed = now - this.since;
      const measured = (this.freed - this.freedAtSince) / elapsed;
      // Weighed by the time it covers: counted as one more 100 ms, a quiet
      // minute measured at once would leave a worker whose queue has gone
      // quiet claiming ahead at half its busy rate.
      const kept = 0.5 ** (elapsed / HALF_LIFE_MS);
      this.perMs = kept * this.perMs + (1 - kept) * measured;
      this.since = now;
      this.freedAtSince = this.freed;
    }
    const perWindow = this.perMs * WINDOW_MS;
    if (perWindow < this.concurrency) return 0;
    return Math.max(this.concurrency, Math.min(MAX, Math.ceil(perWindow)));
  }
}
