import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import { CLAIM_DUE_SCHEDULES, FIRE_SCHEDULE, SKIP_TO_NEXT_RUN } from '../sql/schedules.sql.js';
import type { Statement } from '../sql/statement.js';
import type { StampededClock } from '../interfaces/clock.interface.js';
import type { ScheduleFiring } from '../interfaces/schedule.interface.js';
import { planFiring, type FiringPlan } from './schedule-rule.js';
import { ruleOf } from './schedule.mapper.js';

export interface FirerConfig {
  batchSize: number;
  misfireGraceMs: number;
}

/** Stops a tick from looping forever on a schedule that is always due again. */
const MAX_BATCHES_PER_TICK = 100;

/**
 * Fires due schedules, exactly once per occurrence, from any number of
 * processes at once.
 *
 * A batch is one transaction: claim the due rows (FOR UPDATE SKIP LOCKED, so
 * two processes never hold the same schedule), then fire each, computing its
 * next_run_at here with the cron library, and commit. The row lock lasts as
 * long as the transaction and no longer. stampeded_fire_schedule records the
 * occurrence in the ledger under a unique token before it enqueues, so even a
 * process that claimed a row the instant another committed it finds the
 * occurrence taken and enqueues nothing.
 */
export class ScheduleFirer {
  private readonly logger = new Logger('Stampeded');
  private readonly broken = new Set<string>();

  constructor(
    private readonly db: StampededDatabase,
    private readonly config: FirerConfig,
    private readonly clock: StampededClock | undefined,
  ) {}

  async fireDue(): Promise<ScheduleFiring[]> {
    const firings: ScheduleFiring[] = [];
    for (let batch = 0; batch < MAX_BATCHES_PER_TICK; batch++) {
      const { claimed, fired } = await this.fireBatch();
      firings.push(...fired);
      if (claimed < this.config.batchSize) break;
    }
    return firings;
  }

  private async fireBatch(): Promise<{ claimed: number; fired: ScheduleFiring[] }> {
    return this.db.transaction(async (client) => {
      const run = async (statement: Statement, values: unknown[]) => {
        return (await client.query(this.db.queryConfig(statement, values))).rows;
      };
      const rows = await run(CLAIM_DUE_SCHEDULES, [this.config.batchSize, this.clock?.now() ?? null]);
      const fired: ScheduleFiring[] = [];
      for (const row of rows) {
        const dueAt: Date = row.next_run_at;
        const plan = this.plan(row, dueAt, row.claimed_at);
        if (plan.fire) {
          const [{ job_id }] = await run(FIRE_SCHEDULE, [row.key, plan.nextRunAt]);
          fired.push({ key: row.key, dueAt, jobId: job_id, outcome: job_id ? 'fired' : 'duplicate', nextRunAt: plan.nextRunAt });
        } else {
          await run(SKIP_TO_NEXT_RUN, [row.key, plan.nextRunAt]);
          fired.push({ key: row.key, dueAt, jobId: null, outcome: 'skipped', nextRunAt: plan.nextRunAt });
        }
      }
      return { claimed: rows.length, fired };
    });
  }

  /**
   * A row another runtime wrote with a rule this one cannot read (or a zone
   * this platform lacks) must not stop the others from firing: it is put off
   * by an hour and reported once.
   */
  private plan(row: Record<string, any>, dueAt: Date, now: Date): FiringPlan {
    try {
      return planFiring(ruleOf(row), dueAt, now, this.config.misfireGraceMs);
    } catch (err) {
      if (!this.broken.has(row.key)) {
        this.broken.add(row.key);
        this.logger.error(`schedule "${row.key}" cannot be planned (${(err as Error).message}); retrying it hourly`);
      }
      return { fire: false, missed: false, nextRunAt: new Date(now.getTime() + 3_600_000) };
    }
  }
}
