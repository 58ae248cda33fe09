import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import { SWEEP_ORDERING } from '../sql/maintenance.sql.js';
import type { MaintenanceConfig } from './maintenance.config.js';
import type { MaintenanceTask } from './maintenance-task.js';

interface SweepRow {
  keys: number;
  released: number;
  last_queue: string | null;
  last_key: string | null;
}

/** Keys looked at per statement. */
const SWEEP_BATCH = 500;

/**
 * Releases the keyed jobs left waiting at the front of their key's order with no
 * active job ahead of them. The outcome of the job ahead releases the next
 * one in its own transaction; the one interleaving it cannot see is an
 * enqueue that read the key while that job was unfinished and commits its
 * job 'pending' after the outcome's release looked (docs/ordering.md). Such
 * a job would wait for nothing, so it waits at most one interval of this.
 */
export class OrderingSweeper implements MaintenanceTask {
  readonly name = 'ordering' as const;
  private readonly logger = new Logger('Stampeded');

  constructor(
    private readonly db: StampededDatabase,
    private readonly config: MaintenanceConfig,
  ) {}

  get intervalMs(): number {
    return this.config.orderingSweepIntervalMs;
  }

  async runOnce(): Promise<{ released: number; batches: number }> {
    let released = 0;
    let batches = 0;
    let after: (string | null)[] = [null, null];
    for (;;) {
      const rows: SweepRow[] = await this.db.query<SweepRow>(SWEEP_ORDERING, [...after, SWEEP_BATCH]);
      batches++;
      const row: SweepRow = rows[0];
      released += row.released;
      if (row.keys < SWEEP_BATCH || row.last_queue === null || row.last_key === null) break;
      after = [row.last_queue, row.last_key];
    }
    if (released) this.logger.warn(`ordering: released ${released} keyed job(s) left waiting with nothing ahead of them`);
    return { released, batches };
  }
}
