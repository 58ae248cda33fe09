import { Logger } from '@nestjs/common';
import { hostname } from 'node:os';
import type { StampededDatabase } from '../database/stampeded-database.js';
import { DEREGISTER_WORKER, HEARTBEAT, REGISTER_WORKER } from '../sql/workers.sql.js';
import { sql } from '../sql/statement.js';

const OWNED_JOBS = sql(
  'stampeded_owned_jobs',
  `SELECT count(*)::int AS n FROM stampeded_jobs WHERE claimed_by = $1 AND state IN ('claimed', 'executing')`,
);

/** The worker's row in stampeded_workers: registered at start, heartbeated, removed at a clean stop. */
export class WorkerRegistration {
  private readonly logger = new Logger('Stampeded');
  private timer?: NodeJS.Timeout;
  private failing = false;

  private constructor(
    private readonly db: StampededDatabase,
    readonly workerId: string,
  ) {}

  static async register(
    db: StampededDatabase,
    queues: string[],
    metadata: Record<string, unknown>,
  ): Promise<WorkerRegistration> {
    const [{ id }] = await db.query<{ id: string }>(REGISTER_WORKER, [hostname(), process.pid, queues, JSON.stringify(metadata)]);
    return new WorkerRegistration(db, id);
  }

  startHeartbeat(intervalMs: number): void {
    this.timer = setInterval(() => {
      this.db.query(HEARTBEAT, [this.workerId]).then(
        () => {
          if (this.failing) this.logger.log('worker heartbeat restored');
          this.failing = false;
        },
        (err: unknown) => {
          if (!this.failing) this.logger.warn(`worker heartbeat failed: ${(err as Error).message}`);
          this.failing = true;
        },
      );
    }, intervalMs);
  }

  /**
   * Removes the row only when the worker owns no job any more. A row deleted
   * while it still owns jobs would hide them from the reaper, which finds
   * orphans through their worker's stale heartbeat; left in place, the row
   * goes stale and the reaper gives those jobs back.
   */
  async deregister(): Promise<void> {
    clearInterval(this.timer);
    try {
      const [{ n }] = await this.db.query<{ n: number }>(OWNED_JOBS, [this.workerId]);
      if (n === 0) await this.db.query(DEREGISTER_WORKER, [this.workerId]);
      else this.logger.warn(`worker ${this.workerId} still owns ${n} job(s) at shutdown; the reaper will give them back`);
    } catch (err) {
      this.logger.warn(`could not deregister worker ${this.workerId}: ${(err as Error).message}`);
    }
  }
}
