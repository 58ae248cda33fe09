import type { Job } from '../interfaces/job.interface.js';
import type { Verdict } from './queue-policy.tree.js';

/** One row of READ_VERDICTS (sql/control.sql.ts). */
export interface VerdictRow {
  queue: string;
  verdict: Verdict;
  paused: boolean | null;
  fresh: boolean | null;
  decided_at: Date | null;
  max_running: number | null;
  live_running: number | null;
  workers: number | string | null;
}

export interface QueueView {
  verdict: Verdict;
  paused: boolean;
  maxRunning: number | null;
  /** Claimed plus executing across the fleet, counted when this view was read. */
  running: number | null;
  /** Live workers that claim from the queue: the free room is split between them. */
  workers: number;
  /** This worker's jobs of the queue when `running` was counted. */
  baseline?: number;
}

/** An outcome that never came (the job was lost or cancelled) stops counting after this long. */
export const AWAITING_OUTCOME_TIMEOUT_MS = 10_000;

/**
 * The verdict a worker obeys. A verdict older than the freshness window is
 * steady, so a dead planner degrades to round robin; an operator's pause is
 * not the planner's to lose, and holds however old it is.
 */
export function obeyedVerdict(row: Pick<VerdictRow, 'verdict' | 'paused' | 'fresh' | 'decided_at'>): Verdict {
  if (row.paused) return 'hold';
  return row.fresh === true && row.decided_at !== null ? row.verdict : 'steady';
}

export function toQueueView(row: VerdictRow, baseline: number | undefined): QueueView {
  return {
    verdict: obeyedVerdict(row),
    paused: row.paused === true,
    maxRunning: row.max_running,
    running: row.live_running,
    workers: Math.max(1, Number(row.workers ?? 1)),
    baseline,
  };
}

/** Room in a queue without a live count to split: none while paused or held, otherwise no limit. */
export function uncappedRoom(view: Pick<QueueView, 'paused' | 'verdict'>): number {
  return view.paused || view.verdict === 'hold' ? 0 : Infinity;
}

/**
 * One worker's room under a queue's max_running: the room free at the last
 * read, split between the queue's live workers, on top of what this worker
 * held then (`baseline`), less what it holds now (`mine`). Over the cap the
 * share is negative: each worker gives up its part of the excess as its jobs
 * finish.
 */
export function cappedRoom(maxRunning: number, running: number, workers: number, baseline: number, mine: number): number {
  const free = maxRunning - running;
  const share = free >= 0 ? Math.ceil(free / workers) : -Math.ceil(-free / workers);
  return Math.max(0, baseline + share - mine);
}

/**
 * The queue gate: which of a worker's queues are held or rushed, and how much
 * room a capped queue has for this worker. Fed by ControlGate's reads.
 */
export class VerdictGate {
  private views = new Map<string, QueueView>();
  /** The worker's count of its own jobs per queue, as last handed to room(). */
  private readonly inFlightOf = new Map<string, () => number>();
  /**
   * Jobs that left the worker's hands but whose outcome is not yet written:
   * still 'executing' in the database, so still counted against max_running.
   * Left out, each worker would claim replacements while completions are in
   * flight, and the fleet would run several times over the cap
   * (docs/queue-control.md has the measured overshoot).
   */
  private readonly awaitingOutcome = new Map<string, { queue: string; since: number }>();

  /** The verdicts just read replace the last ones. */
  apply(rows: VerdictRow[], now = Date.now()): void {
    const views = new Map<string, QueueView>();
    for (const row of rows) views.set(row.queue, toQueueView(row, this.mine(row.queue, this.inFlightOf.get(row.queue))));
    this.views = views;
    for (const [id, entry] of this.awaitingOutcome) if (now - entry.since > AWAITING_OUTCOME_TIMEOUT_MS) this.awaitingOutcome.delete(id);
  }

  /** The worker's queues whose verdict is rush, to be claimed from first. */
  rushed(queues: string[]): string[] {
    if (this.views.size === 0) return [];
    return queues.filter((q) => this.views.get(q)?.verdict === 'rush');
  }

  /**
   * How many more jobs of the queue this worker may hold. 0 while paused.
   * With max_running, the count is a live one, not the planner's, so a worker
   * reuses its own finished slots at once, and the planner's 'hold' for
   * max_running is for the dashboard: the worker's own count is fresher.
   */
  room(queue: string, inFlight: () => number): number {
    const view = this.views.get(queue);
    if (!view) return Infinity;
    if (view.paused || view.maxRunning === null || view.running === null) return uncappedRoom(view);
    this.inFlightOf.set(queue, inFlight);
    const mine = this.mine(queue, inFlight)!;
    view.baseline ??= mine;
    return cappedRoom(view.maxRunning, view.running, view.workers, view.baseline, mine);
  }

  /**
   * A queue whose room this gate counts: the worker claims it one statement
   * at a time, as it does a queue with a per-process concurrency, so that two
   * claims sent together do not both take the same room.
   */
  capped(queue: string): boolean {
    const view = this.views.get(queue);
    return view !== undefined && (view.paused || view.maxRunning !== null);
  }

  /** A job left this worker's hands; under a cap it counts until its outcome is written. */
  settled(job: Job, now = Date.now()): void {
    if (this.views.get(job.queue)?.maxRunning != null) this.awaitingOutcome.set(job.id, { queue: job.queue, since: now });
  }

  /** The job's outcome is written (or was not ours to write). */
  recorded(job: Job): void {
    this.awaitingOutcome.delete(job.id);
  }

  private mine(queue: string, inFlight: (() => number) | undefined): number | undefined {
    if (!inFlight) return undefined;
    let n = inFlight();
    for (const entry of this.awaitingOutcome.values()) if (entry.queue === queue) n++;
    return n;
  }
}
