import type { RegisteredTask, TaskRegistry } from '../explorer/task.registry.js';
import type { Job } from '../interfaces/job.interface.js';
import { DEFAULT_QUEUE } from '../stampeded.constants.js';
import type { RunOutcome } from './job-executor.js';
import type { ChunkRoom } from './job-producer.js';
import type { RunningJob } from './running-jobs.js';

/** The jobs of one chunked task and queue that one handleChunk() call gets, from the first one's arrival to their outcomes. */
export interface RunningChunk {
  readonly queue: string;
  readonly task: RegisteredTask & { chunk: Required<NonNullable<RegisteredTask['chunk']>> };
  /** Every job that joined, in arrival order; those settled since (cancelled, timed out) are skipped. */
  readonly entries: RunningJob[];
  /** By job, when its claim counted it in its rate limits' windows (performance.now()): its start grace counts from it (StartGrace). */
  readonly countedAt: Map<RunningJob, number | undefined>;
  /** Its jobs that have not settled. */
  live: number;
  /** Filling: waiting for jobs; running: its handler was called; ended: it holds no slot any more. */
  state: 'filling' | 'running' | 'ended';
  timer?: NodeJS.Timeout;
  /** The chunk's signal, made when the handler first reads ctx.signal. */
  controller?: AbortController;
  abortedWith?: Error;
}

/** The chunk's AbortSignal (ChunkContext.signal), made when first asked for. */
export function chunkSignal(chunk: RunningChunk): AbortSignal {
  if (!chunk.controller) {
    chunk.controller = new AbortController();
    if (chunk.abortedWith) chunk.controller.abort(chunk.abortedWith);
  }
  return chunk.controller.signal;
}

/** Fires the chunk's signal: it timed out, the worker shuts down, or lost its heartbeat. */
export function abortChunk(chunk: RunningChunk, error: Error): void {
  if (chunk.controller) chunk.controller.abort(error);
  else chunk.abortedWith ??= error;
}

const keyOf = (queue: string, task: string) => `${queue}\u0000${task}`;

/**
 * Groups the jobs of chunked tasks into chunks, per queue and task, as the
 * producer hands them over, and starts each once it holds `size` jobs or
 * `waitMs` after its first arrived. A chunk holds one of the worker's slots
 * from its first job to its handler's return, whatever it holds: the
 * worker's `concurrency` counts handler calls (docs/tasks.md, "Chunks").
 * It tells the producer how many jobs its free slots and its filling chunks
 * can take (ChunkRoom), so that one claim can fill a chunk.
 */
export class Chunks implements ChunkRoom {
  private readonly filling = new Map<string, RunningChunk>();
  /** The chunks holding a slot: filling or running. */
  private readonly holding = new Set<RunningChunk>();
  private liveJobs = 0;
  private readonly perSlotByQueue = new Map<string, number>();
  private readonly outcomes = new WeakMap<RunningJob, (outcome: RunOutcome) => void>();

  constructor(
    private readonly tasks: TaskRegistry,
    /** Runs a chunk to its jobs' outcomes (ChunkRunner); it calls release() once its handler returned. */
    private readonly run: (chunk: RunningChunk) => Promise<void>,
    /**
     * Whether the queue's chunks start with the jobs at hand, without
     * waiting to fill: a rate-limited queue's jobs must start within their
     * grace of the claim (StartGrace).
     */
    private readonly startsAtOnce: (queue: string) => boolean,
    /** A chunk gave its slot back. */
    private readonly slotFreed: () => void,
  ) {}

  /** Slots the chunks hold. */
  get slots(): number {
    return this.holding.size;
  }

  /** The jobs in chunks, not yet settled: they take no slot of their own. */
  get jobs(): number {
    return this.liveJobs;
  }

  get fillingCount(): number {
    return this.filling.size;
  }

  /**
   * The jobs a free slot takes from the queue: the smallest chunk of its
   * tasks when each task this worker declares on it is chunked, and 1
   * otherwise, so that a plain job is never claimed further ahead than
   * without chunks. Give a chunked task a queue of its own for one claim to
   * fill its chunk.
   */
  perSlot(queue: string): number {
    let n = this.perSlotByQueue.get(queue);
    if (n === undefined) {
      const declared = this.tasks.all().filter((t) => (t.metadata.queue ?? DEFAULT_QUEUE) === queue);
      n = declared.length && declared.every((t) => t.chunk) ? Math.min(...declared.map((t) => t.chunk!.size)) : 1;
      this.perSlotByQueue.set(queue, n);
    }
    return n;
  }

  /** The room left in the queue's filling chunks. */
  spare(queue: string): number {
    let n = 0;
    for (const chunk of this.filling.values()) if (chunk.queue === queue) n += chunk.task.chunk.size - chunk.live;
    return n;
  }

  /** Whether the job would join a filling chunk, taking no slot. */
  joins(job: Job): boolean {
    return this.filling.has(keyOf(job.queue, job.task));
  }

  /** A job of a chunked task, handed over by the producer: it joins its filling chunk, or opens one. Resolves with its outcome. */
  add(entry: RunningJob, task: RegisteredTask, countedAt: number | undefined): Promise<RunOutcome> {
    const { queue } = entry.job;
    const key = keyOf(queue, task.metadata.name);
    let chunk = this.filling.get(key);
    if (!chunk) {
      chunk = { queue, task: task as RunningChunk['task'], entries: [], countedAt: new Map(), live: 0, state: 'filling' };
      const opened = chunk;
      this.filling.set(key, opened);
      this.holding.add(opened);
      // With no wait, after the jobs handed over with this one.
      opened.timer = setTimeout(() => this.start(opened), this.startsAtOnce(queue) ? 0 : task.chunk!.waitMs);
    }
    entry.chunk = chunk;
    chunk.entries.push(entry);
    chunk.countedAt.set(entry, countedAt);
    chunk.live++;
    this.liveJobs++;
    const done = new Promise<RunOutcome>((resolve) => this.outcomes.set(entry, resolve));
    if (chunk.live >= chunk.task.chunk.size) this.start(chunk);
    return done;
  }

  /** Starts every filling chunk now, with what it holds: drain() runs each job as it claims it. */
  startFilling(): void {
    for (const chunk of [...this.filling.values()]) this.start(chunk);
  }

  private start(chunk: RunningChunk): void {
    if (chunk.state !== 'filling') return;
    clearTimeout(chunk.timer);
    this.filling.delete(keyOf(chunk.queue, chunk.task.metadata.name));
    chunk.state = 'running';
    void this.run(chunk).finally(() => this.end(chunk));
  }

  /** The chunk's handler returned, or it will never run: its slot is free, while its jobs' outcomes are being recorded. */
  release(chunk: RunningChunk): void {
    clearTimeout(chunk.timer);
    if (chunk.state === 'filling') this.filling.delete(keyOf(chunk.queue, chunk.task.metadata.name));
    if (!this.holding.delete(chunk)) return;
    this.slotFreed();
  }

  /** The chunk is done with: each job's outcome that nobody recorded is what its abort says. */
  private end(chunk: RunningChunk): void {
    this.release(chunk);
    chunk.state = 'ended';
    for (const entry of chunk.entries) this.finish(entry, entry.abortReason === 'cancelled' ? 'cancelled' : 'lost');
  }

  /**
   * A job of a chunk settled (its outcome decided, or it was cancelled,
   * timed out or lost). A chunk left with none frees its slot: one still
   * filling has nothing to run, and a running one's handler may go on, but
   * nothing it does is recorded, as for a single job that timed out.
   */
  left(entry: RunningJob): void {
    const chunk = entry.chunk;
    if (!chunk) return;
    chunk.live--;
    this.liveJobs--;
    if (chunk.live > 0) return;
    if (chunk.state === 'filling') this.end(chunk);
    else this.release(chunk);
  }

  /** The job's outcome, for whoever awaits its execution (drain()); the first one given counts. */
  finish(entry: RunningJob, outcome: RunOutcome): void {
    const resolve = this.outcomes.get(entry);
    if (!resolve) return;
    this.outcomes.delete(entry);
    resolve(outcome);
  }

  /**
   * The jobs of every chunk still filling, taken out, their slots freed:
   * they never started, and are the caller's to give back (shutdown, a lost
   * heartbeat).
   */
  takeUnstarted(): RunningJob[] {
    const entries: RunningJob[] = [];
    for (const chunk of [...this.filling.values()]) {
      this.release(chunk);
      chunk.state = 'ended';
      for (const entry of chunk.entries) if (!entry.settled) entries.push(entry);
    }
    return entries;
  }
}
