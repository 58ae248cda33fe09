import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import { PRUNE, PRUNE_OCCURRENCES, PRUNE_OCCURRENCES_BATCH } from '../sql/maintenance.sql.js';
import { PRUNE_WORKFLOWS, PRUNE_WORKFLOWS_SCAN } from '../sql/workflows.sql.js';
import type { MaintenanceConfig } from './maintenance.config.js';
import type { MaintenanceTask } from './maintenance-task.js';

/**
 * Deletes finished jobs past their retention, the workflows none of whose
 * jobs is left (PRUNE_WORKFLOWS), and the schedules' occurrence ledger past
 * its own retention.
 *
 * Each batch is its own statement and transaction: stampeded_prune takes
 * its rows FOR UPDATE SKIP LOCKED, so a batch never waits on a job a worker
 * holds and never holds a worker up for longer than one batch. It loops while
 * full batches come back (the seed's count is a real count for exactly this
 * loop), and stops at pruneMaxDurationMs: a backlog of millions is worked off
 * over several ticks instead of pinning the leader for minutes. While the
 * insights rollup is on, no job it has not read yet is deleted (PRUNE).
 */
export class JobPruner implements MaintenanceTask {
  readonly name = 'pruner' as const;
  private readonly logger = new Logger('Stampeded');
  /**
   * Where the workflow passes resume: a tick that runs out of time goes on
   * from here at the next, so live workflows at the front never keep the
   * pruner from the empty ones behind them.
   */
  private workflowCursor: string | null = null;

  constructor(
    private readonly db: StampededDatabase,
    private readonly config: MaintenanceConfig,
    private readonly onBatch?: (deleted: number) => void,
  ) {}

  get intervalMs(): number {
    return this.config.pruneIntervalMs;
  }

  async runOnce(): Promise<{ jobsDeleted: number; batches: number; workflowsDeleted: number; occurrencesDeleted: number; backlogLeft: boolean }> {
    const { completedRetentionMs, failedRetentionMs, pruneBatchSize, pruneMaxDurationMs } = this.config;
    const deadline = Date.now() + pruneMaxDurationMs;
    let jobsDeleted = 0;
    let batches = 0;
    let backlogLeft = false;
    for (;;) {
      const [{ deleted }] = await this.db.query<{ deleted: number }>(PRUNE, [completedRetentionMs, pruneBatchSize, failedRetentionMs, this.config.insights]);
      batches++;
      jobsDeleted += deleted;
      this.onBatch?.(deleted);
      if (deleted < pruneBatchSize) break;
      if (Date.now() >= deadline) {
        backlogLeft = true;
        break;
      }
    }

    // After the jobs: a workflow whose last jobs this tick deleted goes in the same tick.
    let workflowsDeleted = 0;
    for (;;) {
      const [pass] = await this.db.query<{ deleted: number; last: string | null; more: boolean }>(PRUNE_WORKFLOWS, [
        this.workflowCursor,
        PRUNE_WORKFLOWS_SCAN,
        pruneBatchSize,
      ]);
      workflowsDeleted += pass.deleted;
      this.workflowCursor = pass.more ? pass.last : null;
      if (!pass.more || Date.now() >= deadline) break;
    }

    let occurrencesDeleted = 0;
    for (;;) {
      const [{ deleted }] = await this.db.query<{ deleted: number }>(PRUNE_OCCURRENCES, [this.config.occurrenceRetentionMs]);
      occurrencesDeleted += deleted;
      if (deleted < PRUNE_OCCURRENCES_BATCH || Date.now() >= deadline) break;
    }
    if (jobsDeleted || workflowsDeleted || occurrencesDeleted) {
      this.logger.log(
        `pruner: deleted ${jobsDeleted} finished job(s) in ${batches} batch(es), ${workflowsDeleted} workflow(s) with no job left ` +
          `and ${occurrencesDeleted} occurrence(s)` +
          (backlogLeft ? '; more left for the next tick' : ''),
      );
    }
    return { jobsDeleted, batches, workflowsDeleted, occurrencesDeleted, backlogLeft };
  }
}
