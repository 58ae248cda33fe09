import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import { PARTITION_HEALTH, REPAIR_PARTITION } from '../sql/maintenance.sql.js';
import type { MaintenanceConfig } from './maintenance.config.js';
import type { MaintenanceTask } from './maintenance-task.js';

/**
 * A partition without its notify trigger leaves its workers asleep until
 * their next poll; without its counter triggers, counts() goes quietly
 * wrong. Both happen to partitions attached by hand. This finds them with
 * stampeded_partition_health() and gives them their triggers back.
 */
export class PartitionRepairer implements MaintenanceTask {
  readonly name = 'partitions' as const;
  private readonly logger = new Logger('Stampeded');

  constructor(
    private readonly db: StampededDatabase,
    private readonly config: MaintenanceConfig,
  ) {}

  get intervalMs(): number {
    return this.config.partitionCheckIntervalMs;
  }

  async runOnce(): Promise<{ checked: number; repaired: Record<string, string[]> }> {
    const rows = await this.db.query<{ partition: string; has_notify: boolean; has_counts: boolean }>(PARTITION_HEALTH);
    const repaired: Record<string, string[]> = {};
    for (const row of rows) {
      if (row.has_notify && row.has_counts) continue;
      const [{ repaired: triggers }] = await this.db.query<{ repaired: string[] }>(REPAIR_PARTITION, [row.partition]);
      if (triggers.length) {
        repaired[row.partition] = triggers;
        this.logger.warn(`partition ${row.partition} was missing ${triggers.join(', ')}; recreated them and recounted its queues`);
      }
    }
    return { checked: rows.length, repaired };
  }
}
