import type { ClaimBuffer } from './claim-buffer.js';
import type { JobRunner, ProducerConfig } from './job-producer.js';

/**
 * How many jobs a worker may claim now (JobProducer): for its free slots
 * and its prefetch, less what its buffer holds, and within each queue's
 * own bounds -- its cap, its pause, and for a limited queue what can start
 * at once. A free slot takes one job, or a chunk's worth from a queue whose
 * tasks are all chunked, and a filling chunk takes its task's jobs with no
 * slot of its own (ChunkRoom).
 */
export class ClaimRoom {
  constructor(
    private readonly config: ProducerConfig,
    private readonly runner: JobRunner,
    private readonly buffer: ClaimBuffer,
    /** Jobs to hold claimed ahead of free slots. */
    private readonly prefetch: () => number,
    /** Buffered jobs that may start now (JobProducer.startableBuffered). */
    private readonly startableBuffered: () => number,
  ) {}

  /** The jobs to claim: for the free slots (of the queue, when given) and the prefetch, less those buffered. */
  total(queue?: string): number {
    return this.free(queue) + this.prefetch() - this.startableBuffered();
  }

  /** The jobs the free slots take now, and the queue's filling chunks. */
  free(queue?: string): number {
    const free = this.config.concurrency - this.runner.runningCount;
    const chunks = this.runner.chunks;
    if (!chunks || queue === undefined) return free;
    return free * chunks.perSlot(queue) + chunks.spare(queue);
  }

  /** The queue's own bound on a claim. */
  ofQueue(queue: string): number {
    const cap = this.config.queueConcurrency.get(queue);
    const control = this.config.control;
    // A paused queue has no room.
    let room = control ? control.room(queue) : Infinity;
    // A limited queue's claimed jobs count against its cap and windows from
    // the claim: it takes only what can start now, not the prefetch.
    if (control?.limited(queue)) room = Math.min(room, this.free(queue) - this.buffer.length);
    if (cap === undefined) return room;
    return Math.min(room, cap - this.runner.runningIn(queue) - this.buffer.countIn(queue));
  }

  /** A queue claimed one statement at a time: it has a cap, or queue control counts its claims. */
  capped(queue: string): boolean {
    return this.config.queueConcurrency.has(queue) || this.config.control?.counted(queue) === true;
  }
}
