import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import { INSIGHTS_RETENTION, ROLLUP_INSIGHTS } from '../sql/maintenance.sql.js';
import { INSIGHTS_HISTOGRAM } from './insights-histogram.js';
import type { MaintenanceConfig } from './maintenance.config.js';
import type { MaintenanceTask } from './maintenance-task.js';

/**
 * Tenants and destinations kept per hour and queue, task or all: the bound
 * on stampeded_insight_keys, and how many the dashboard lists.
 */
export const INSIGHTS_TOP_KEYS = 10;

/**
 * Keeps the insights rollup (migration 19) behind the dashboard's charts:
 * adds the jobs finished since its watermark to their minute and hour rows,
 * a batch a statement, while full batches come back and for at most
 * pruneMaxDurationMs a tick, then deletes the rows past their retention.
 * Each batch moves the watermark in its own transaction, so a tick cut
 * short, a crash or a second run beside it (run() by hand) neither loses
 * nor doubles a job.
 */
export class InsightsRollup implements MaintenanceTask {
  readonly name = 'insights' as const;
  private readonly logger = new Logger('Stampeded');

  constructor(
    private readonly db: StampededDatabase,
    private readonly config: MaintenanceConfig,
  ) {}

  get intervalMs(): number {
    return this.config.insightsIntervalMs;
  }

  async runOnce(): Promise<{ jobs: number; batches: number; through: Date | null; backlogLeft: boolean; rowsExpired: number }> {
    const deadline = Date.now() + this.config.pruneMaxDurationMs;
    let jobs = 0;
    let batches = 0;
    let through: Date | null = null;
    let backlogLeft = false;
    for (;;) {
      const [batch] = await this.db.query<{ jobs: number; through: Date | null; more: boolean }>(ROLLUP_INSIGHTS, [
        this.config.insightsSettleMs,
        this.config.insightsBatchSize,
        INSIGHTS_HISTOGRAM.buckets,
        INSIGHTS_HISTOGRAM.perOctave,
        INSIGHTS_TOP_KEYS,
      ]);
      batches++;
      jobs += batch.jobs;
      through = batch.through;
      if (!batch.more) break;
      if (Date.now() >= deadline) {
        backlogLeft = true;
        break;
      }
    }
    const [{ deleted: rowsExpired }] = await this.db.query<{ deleted: number }>(INSIGHTS_RETENTION, [
      this.config.insightsMinuteRetentionMs,
      this.config.insightsHourRetentionMs,
    ]);
    if (backlogLeft) this.logger.log(`insights: rolled up ${jobs} finished job(s) in ${batches} batch(es); more left for the next tick`);
    return { jobs, batches, through, backlogLeft, rowsExpired };
  }
}
