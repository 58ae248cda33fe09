import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import { EXPIRE } from '../sql/maintenance.sql.js';
import type { MaintenanceConfig } from './maintenance.config.js';
import type { MaintenanceTask } from './maintenance-task.js';

/**
 * Fails jobs that ran past expire_seconds without a touch (failure kind
 * timed_out). A live worker times its own jobs out and fires their
 * AbortSignal; this catches the jobs of a worker that is alive but stuck,
 * which the reaper never will, since its heartbeat is fine.
 */
export class JobExpirer implements MaintenanceTask {
  readonly name = 'expirer' as const;
  /** Its scan reads every running job: spaced by its cost (nextRunDelayMs()). */
  readonly spacedByCost = true;
  private readonly logger = new Logger('Stampeded');

  constructor(
    private readonly db: StampededDatabase,
    private readonly config: MaintenanceConfig,
  ) {}

  get intervalMs(): number {
    return this.config.expireIntervalMs;
  }

  async runOnce(): Promise<{ expired: number; batches: number }> {
    let expired = 0;
    let batches = 0;
    for (;;) {
      const rows = await this.db.query(EXPIRE, [this.config.expireBatchSize]);
      batches++;
      expired += rows.length;
      if (rows.length < this.config.expireBatchSize) break;
    }
    if (expired) this.logger.warn(`expirer: timed out ${expired} job(s) that stopped touching`);
    return { expired, batches };
  }
}
