import type { Verdict } from './queue-verdict.js';

/** One row of READ_VERDICTS (sql/control.sql.ts). */
export interface VerdictRow {
  queue: string;
  verdict: Verdict;
  paused: boolean | null;
  fresh: boolean | null;
  decided_at: Date | null;
  max_running: number | null;
}

export interface QueueView {
  verdict: Verdict;
  paused: boolean;
  maxRunning: number | null;
}

/**
 * The planner's verdict as a worker obeys it: one older than the freshness
 * window, or decided before the row last changed, is steady, so a dead
 * planner degrades to round robin. The pause is not the planner's to lose:
 * it is read from its own column, however old the verdict is (queueRoom).
 */
export function obeyedVerdict(row: Pick<VerdictRow, 'verdict' | 'fresh' | 'decided_at'>): Verdict {
  return row.fresh === true && row.decided_at !== null ? row.verdict : 'steady';
}

export function toQueueView(row: VerdictRow): QueueView {
  return { verdict: obeyedVerdict(row), paused: row.paused === true, maxRunning: row.max_running };
}

/**
 * Room in a queue: none while paused or held, otherwise no limit here. A
 * queue with max_running is held by its claim (stampeded_claim_limited),
 * which counts the fleet's running jobs under a lock, so the planner's
 * 'hold' for max_running is for the dashboard: the claim's count is fresher.
 * A 'hold' with no cap is a pause as a planner saw it, or another runtime's.
 */
export function queueRoom(view: Pick<QueueView, 'paused' | 'verdict' | 'maxRunning'>): number {
  if (view.paused) return 0;
  if (view.verdict === 'hold' && view.maxRunning === null) return 0;
  return Infinity;
}

/**
 * The queue gate: which of a worker's queues are held or rushed, and which
 * have a max_running for their claim to hold. Fed by ControlGate's reads.
 */
export class VerdictGate {
  private views = new Map<string, QueueView>();

  /** The verdicts just read replace the last ones. */
  apply(rows: VerdictRow[]): void {
    this.views = new Map(rows.map((row) => [row.queue, toQueueView(row)]));
  }

  /** The worker's queues whose verdict is rush, to be claimed from first. */
  rushed(queues: string[]): string[] {
    if (this.views.size === 0) return [];
    return queues.filter((q) => this.views.get(q)?.verdict === 'rush');
  }

  /** How many more jobs of the queue this worker may claim: 0 while paused or held. */
  room(queue: string): number {
    const view = this.views.get(queue);
    return view ? queueRoom(view) : Infinity;
  }

  /** A queue with max_running: claimed through the limited claim, which holds the cap. */
  capped(queue: string): boolean {
    return this.views.get(queue)?.maxRunning != null;
  }

  /** A queue claimed from one statement at a time: paused (to claim nothing) or capped. */
  counted(queue: string): boolean {
    const view = this.views.get(queue);
    return view !== undefined && (view.paused || view.maxRunning !== null);
  }
}
