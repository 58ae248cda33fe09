import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import { DELETE_DEAD_WORKERS, REAP } from '../sql/maintenance.sql.js';
import type { MaintenanceConfig } from './maintenance.config.js';
import type { MaintenanceTask } from './maintenance-task.js';

/**
 * Gives back the jobs of workers that stopped heartbeating (failure kind
 * worker_missing, an interruption counted; discarded and dead-lettered once
 * the interruption budget is spent), then removes those workers' rows.
 */
export class JobReaper implements MaintenanceTask {
  readonly name = 'reaper' as const;
  /** Its scan reads every running job: spaced by its cost (nextRunDelayMs()). */
  readonly spacedByCost = true;
  private readonly logger = new Logger('Stampeded');

  constructor(
    private readonly db: StampededDatabase,
    private readonly config: MaintenanceConfig,
  ) {}

  get intervalMs(): number {
    return this.config.reapIntervalMs;
  }

  async runOnce(): Promise<{ reaped: number; workersRemoved: number; jobs: { id: string; queue: string; workerId: string }[] }> {
    const rows = await this.db.query<{ id: string; queue: string; worker_id: string }>(REAP, [this.config.reapDeadAfterMs]);
    const removed = await this.db.query<{ id: string }>(DELETE_DEAD_WORKERS, [this.config.reapDeadAfterMs]);
    if (rows.length || removed.length) {
      this.logger.warn(`reaper: gave back ${rows.length} job(s) of dead workers, removed ${removed.length} dead worker row(s)`);
    }
    return {
      reaped: rows.length,
      workersRemoved: removed.length,
      jobs: rows.map((r) => ({ id: r.id, queue: r.queue, workerId: r.worker_id })),
    };
  }
}
