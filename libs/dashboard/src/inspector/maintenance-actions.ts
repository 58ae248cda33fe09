import type { RedriveOptions, RedriveResult } from '@stampeded/nestjs';
import { DeadLetterRedriver, StampededConfigError } from '@stampeded/nestjs/internal';
import { PRUNE_BATCH, PRUNE_OCCURRENCES } from '../sql/maintenance.sql.js';
import type { InspectorDatabase } from './inspector-database.js';
import { InspectorInputError } from './inspector-input.js';

/** QueueService.redrive()'s options and answer: the inspector redrives with the same code. */
export type { RedriveOptions, RedriveResult };

export interface PruneOptions {
  completedOlderThan?: string;
  failedOlderThan?: string;
  occurrencesOlderThan?: string;
  batchSize?: number;
  onProgress?: (deleted: number) => void;
}

/** An operator's maintenance by hand: dead letters put back, finished jobs pruned. */
export class MaintenanceActions {
  constructor(private readonly db: InspectorDatabase) {}

  /**
   * Puts a dead-letter queue's copies back on their source queues, in
   * batches, optionally only those of one task or one error fingerprint:
   * @stampeded/nestjs's DeadLetterRedriver, the code behind
   * QueueService.redrive(), so the dashboard, the CLI and the app move
   * copies alike. Its refusals of bad input are the operator's to fix: a 400
   * in the API, exit code 2 in the CLI.
   */
  async redrive(queue: string, options: RedriveOptions = {}): Promise<RedriveResult> {
    try {
      return await new DeadLetterRedriver(this.db).redrive(queue, options, { where: 'redrive' });
    } catch (err) {
      if (err instanceof StampededConfigError) throw new InspectorInputError(err.message);
      throw err;
    }
  }

  /** Deletes finished jobs past their retention, batch by batch until a short batch comes back. */
  async prune(options: PruneOptions = {}): Promise<{ jobs: number; occurrences: number }> {
    const batchSize = options.batchSize ?? 10_000;
    let jobs = 0;
    for (;;) {
      const [{ deleted }] = await this.db.query<{ deleted: number }>(PRUNE_BATCH, [
        options.completedOlderThan ?? '1 hour',
        batchSize,
        options.failedOlderThan ?? '7 days',
      ]);
      jobs += deleted;
      if (deleted) options.onProgress?.(jobs);
      if (deleted < batchSize) break;
    }
    let occurrences = 0;
    for (;;) {
      const [{ deleted }] = await this.db.query<{ deleted: number }>(PRUNE_OCCURRENCES, [options.occurrencesOlderThan ?? '30 days']);
      occurrences += deleted;
      // stampeded_prune_occurrences deletes at most 10000 a call.
      if (deleted < 10_000) break;
    }
    return { jobs, occurrences };
  }
}
