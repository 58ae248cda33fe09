import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import { INDEX_DENSITY, reindexConcurrently } from '../sql/maintenance.sql.js';
import type { MaintenanceConfig } from './maintenance.config.js';
import type { MaintenanceTask } from './maintenance-task.js';

/**
 * Rebuilds the indexes that stampeded_index_density() calls sparse, with
 * REINDEX CONCURRENTLY so that workers keep claiming through it. A queue
 * table churns its partial indexes hard and autovacuum does not give their
 * pages back; a rebuild does.
 *
 * A failed REINDEX CONCURRENTLY leaves an invalid `_ccnew` index behind;
 * the density report skips those, and so does this (in case a future report
 * does not), because rebuilding the leftover of a failed rebuild is how a
 * reindexer ends up in a loop. They are for the operator to drop.
 */
export class Reindexer implements MaintenanceTask {
  readonly name = 'reindexer' as const;
  private readonly logger = new Logger('Stampeded');

  constructor(
    private readonly db: StampededDatabase,
    private readonly config: MaintenanceConfig,
  ) {}

  get intervalMs(): number {
    return this.config.reindexIntervalMs;
  }

  async runOnce(): Promise<{ rebuilt: string[]; failed: string[] }> {
    const rows = await this.db.query<{ indexname: string; sparse: boolean }>(INDEX_DENSITY);
    const rebuilt: string[] = [];
    const failed: string[] = [];
    for (const { indexname, sparse } of rows) {
      if (!sparse || /_ccnew\d*$|_ccold\d*$/.test(indexname)) continue;
      try {
        await this.db.raw(reindexConcurrently(this.db.schema, indexname));
        rebuilt.push(indexname);
      } catch (err) {
        failed.push(indexname);
        this.logger.warn(`reindexer: REINDEX CONCURRENTLY ${indexname} failed: ${(err as Error).message}`);
      }
    }
    if (rebuilt.length) this.logger.log(`reindexer: rebuilt sparse index(es) ${rebuilt.join(', ')}`);
    return { rebuilt, failed };
  }
}
