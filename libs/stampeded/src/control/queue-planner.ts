import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import type { MaintenanceTask } from '../maintenance/maintenance-task.js';
import { PLANNER_INPUTS, WRITE_VERDICTS } from '../sql/control.sql.js';
import { decideVerdict, type QueueFacts, type Verdict } from './queue-verdict.js';
import type { ControlConfig } from './control.config.js';

interface PlannerRow {
  queue: string;
  max_running: number | null;
  max_wait_secs: number | null;
  verdict: Verdict;
  reason: string | null;
  paused: boolean;
  paused_by: string | null;
  pause_reason: string | null;
  /** As text: handed back to WRITE_VERDICTS, which compares it to the microsecond. */
  updated_at: string;
  running: number;
  head_wait_secs: number | null;
}

/**
 * The maintenance leader's planner: every plannerInterval, a verdict per
 * policy row (decideVerdict, queue-verdict.ts), every one written in one
 * statement. It logs only when a verdict changes.
 */
export class QueuePlanner implements MaintenanceTask {
  readonly name = 'planner' as const;
  private readonly logger = new Logger('Stampeded');

  constructor(
    private readonly db: StampededDatabase,
    private readonly config: ControlConfig,
  ) {}

  get intervalMs(): number {
    return this.config.plannerIntervalMs;
  }

  async runOnce(): Promise<{ queues: number; verdicts: Record<string, { verdict: Verdict; reason: string; running: number }> }> {
    const rows = await this.db.query<PlannerRow>(PLANNER_INPUTS);
    const verdicts: Record<string, { verdict: Verdict; reason: string; running: number }> = {};
    for (const row of rows) {
      const facts: QueueFacts = {
        queue: row.queue,
        maxRunning: row.max_running,
        maxWaitSecs: row.max_wait_secs,
        running: row.running,
        headWaitSecs: row.head_wait_secs === null ? null : Number(row.head_wait_secs),
        paused: row.paused,
        pausedBy: row.paused_by,
        pauseReason: row.pause_reason,
      };
      const decision = decideVerdict(facts);
      verdicts[row.queue] = { ...decision, running: row.running };
      if (decision.verdict !== row.verdict) this.logger.log(`planner: queue ${row.queue} ${row.verdict} -> ${decision.verdict} (${decision.reason})`);
    }
    if (rows.length) {
      const updatedAt = new Map(rows.map((r) => [r.queue, r.updated_at]));
      const queues = Object.keys(verdicts);
      await this.db.query(WRITE_VERDICTS, [
        queues,
        queues.map((q) => verdicts[q].verdict),
        queues.map((q) => verdicts[q].reason),
        queues.map((q) => verdicts[q].running),
        queues.map((q) => updatedAt.get(q)),
      ]);
    }
    return { queues: rows.length, verdicts };
  }
}
