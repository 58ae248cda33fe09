import { JOB_STATES, PAUSE_QUEUE, RESUME_QUEUE, type JobState } from '@stampeded/nestjs/internal';
import { QUEUE_COUNTS, QUEUE_STATE } from '../sql/queues.sql.js';
import { THROUGHPUT } from '../sql/jobs.sql.js';
import type { InspectorDatabase } from './inspector-database.js';

export interface QueueSummary {
  queue: string;
  /** Every state of the core's JOB_STATES, in its order, zero when none. */
  counts: Record<JobState, number>;
  verdict: string;
  reason: string | null;
  decidedAt: Date | null;
  maxRunning: number | null;
  maxWaitSecs: number | null;
  /** An operator's pause: no worker claims from the queue until it is resumed. */
  paused: boolean;
  pausedBy: string | null;
  pauseReason: string | null;
  pausedAt: Date | null;
  /** Who last set the policy (an operator, 'registerQueue()' for a declared one), and when; null for none. */
  policyBy: string | null;
  policyAt: Date | null;
  /** How long the job at the head of the claim order has been due, in seconds; null when none is due. */
  headWaitSecs: number | null;
}

export interface ThroughputBucket {
  /** Start of the minute, epoch seconds. */
  at: number;
  /** Jobs that finished (completed, discarded or cancelled) in that minute, all queues. */
  finished: number;
}

/** The queues: their counts, verdicts and pauses, the jobs finished per minute, and an operator's pause. */
export class QueueInspector {
  constructor(private readonly db: InspectorDatabase) {}

  async queues(): Promise<QueueSummary[]> {
    const [counts, states] = await Promise.all([
      this.db.query<{ queue: string; state: JobState; n: string }>(QUEUE_COUNTS),
      this.db.query<Record<string, any>>(QUEUE_STATE),
    ]);
    const byQueue = new Map<string, QueueSummary>();
    const summary = (queue: string) => {
      let s = byQueue.get(queue);
      if (!s) {
        s = this.emptySummary(queue);
        byQueue.set(queue, s);
      }
      return s;
    };
    for (const row of states) {
      const s = summary(row.queue);
      s.verdict = row.verdict ?? 'steady';
      s.reason = row.reason;
      s.decidedAt = row.decided_at;
      s.maxRunning = row.max_running;
      s.maxWaitSecs = row.max_wait_secs;
      s.paused = row.paused === true;
      s.pausedBy = row.paused_by;
      s.pauseReason = row.pause_reason;
      s.pausedAt = row.paused_at;
      s.policyBy = row.policy_by;
      s.policyAt = row.policy_at;
      s.headWaitSecs = row.head_wait_secs === null ? null : Math.max(0, Number(row.head_wait_secs));
    }
    for (const row of counts) if (Number(row.n) !== 0 || byQueue.has(row.queue)) summary(row.queue).counts[row.state] = Number(row.n);
    return [...byQueue.values()].sort((a, b) => a.queue.localeCompare(b.queue));
  }

  /** A queue with no jobs counted and no policy row: what a queue is until it has either. */
  emptySummary(queue: string): QueueSummary {
    return {
      queue,
      counts: emptyCounts(),
      verdict: 'steady',
      reason: null,
      decidedAt: null,
      maxRunning: null,
      maxWaitSecs: null,
      paused: false,
      pausedBy: null,
      pauseReason: null,
      pausedAt: null,
      policyBy: null,
      policyAt: null,
      headWaitSecs: null,
    };
  }

  /** Jobs finished per minute over the last `minutes`, oldest first, every minute present. */
  async throughput(options: { minutes?: number } = {}): Promise<ThroughputBucket[]> {
    const minutes = options.minutes ?? 60;
    const rows = await this.db.query<{ bucket: string; n: string }>(THROUGHPUT, [minutes]);
    const now = Math.floor(Date.now() / 60_000) * 60;
    const buckets = new Map<number, ThroughputBucket>();
    for (let i = minutes - 1; i >= 0; i--) buckets.set(now - i * 60, { at: now - i * 60, finished: 0 });
    // The database's clock decides the buckets; one a little off ours still shows.
    for (const row of rows) buckets.set(Number(row.bucket), { at: Number(row.bucket), finished: Number(row.n) });
    return [...buckets.values()].sort((a, b) => a.at - b.at).slice(-minutes);
  }

  /**
   * An operator's pause, for the whole fleet until resumed: the core's own
   * statement, so the dashboard, the CLI and QueueControlService.pause()
   * write one thing.
   */
  async pauseQueue(queue: string, by: string, why?: string): Promise<Record<string, unknown>> {
    const [row] = await this.db.query(PAUSE_QUEUE, [queue, by, why || null]);
    return row;
  }

  async resumeQueue(queue: string): Promise<Record<string, unknown>> {
    const [row] = await this.db.query(RESUME_QUEUE, [queue]);
    return row;
  }
}

function emptyCounts(): Record<JobState, number> {
  return Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobState, number>;
}
