import type { Job } from '../interfaces/job.interface.js';

/**
 * The jobs a worker claimed and has not started, each queue's in the claim
 * index's order, (priority, scheduled_at). An UPDATE ... RETURNING hands its
 * rows back in no promised order, and a later claim may bring a job that
 * ranks before one claimed earlier: started as they came, a priority 5 job
 * would run before a priority 0 one. A claim's jobs are sorted with their
 * queue's buffered jobs into the places those held, so that the other
 * queues keep their turns.
 */
export class ClaimBuffer {
  private readonly jobs: Job[] = [];

  get length(): number {
    return this.jobs.length;
  }

  /** The buffered jobs, in buffer order. */
  peek(): readonly Job[] {
    return this.jobs;
  }

  /** Adds one claim's jobs of `queue`. */
  add(queue: string, claimed: readonly Job[]): void {
    const places: number[] = [];
    const queued: Job[] = [];
    for (let i = 0; i < this.jobs.length; i++) {
      if (this.jobs[i].queue !== queue) continue;
      places.push(i);
      queued.push(this.jobs[i]);
    }
    for (const job of claimed) {
      places.push(this.jobs.length);
      queued.push(job);
      this.jobs.push(job);
    }
    queued.sort(byClaimOrder);
    for (let k = 0; k < places.length; k++) this.jobs[places[k]] = queued[k];
  }

  /**
   * The first job, in buffer order, that `startable` accepts, taken out;
   * undefined when none is. With `rank`, the accepted job of the lowest
   * rank, the first of those in buffer order.
   */
  takeFirst(startable?: (job: Job) => boolean, rank?: (job: Job) => number): Job | undefined {
    let index = startable ? this.jobs.findIndex(startable) : 0;
    if (index >= 0 && rank) {
      let best = rank(this.jobs[index]);
      for (let i = index + 1; i < this.jobs.length && best > 0; i++) {
        const job = this.jobs[i];
        if (startable && !startable(job)) continue;
        const r = rank(job);
        if (r < best) [index, best] = [i, r];
      }
    }
    return index < 0 ? undefined : this.jobs.splice(index, 1)[0];
  }

  /** The job with this id, taken out. */
  take(jobId: string): Job | undefined {
    const index = this.jobs.findIndex((j) => j.id === jobId);
    return index < 0 ? undefined : this.jobs.splice(index, 1)[0];
  }

  takeAll(): Job[] {
    return this.jobs.splice(0);
  }

  /** How many buffered jobs `matches` accepts. */
  count(matches: (job: Job) => boolean): number {
    let n = 0;
    for (const j of this.jobs) if (matches(j)) n++;
    return n;
  }

  countIn(queue: string): number {
    let n = 0;
    for (const j of this.jobs) if (j.queue === queue) n++;
    return n;
  }

  ids(): string[] {
    return this.jobs.map((j) => j.id);
  }

  has(jobId: string): boolean {
    return this.jobs.some((j) => j.id === jobId);
  }
}

/** The claim index's order, (priority, scheduled_at); the sort is stable, so ties keep the claim's order. */
function byClaimOrder(a: Job, b: Job): number {
  return a.priority - b.priority || a.scheduledAt.getTime() - b.scheduledAt.getTime();
}
