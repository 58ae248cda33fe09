import { Logger } from '@nestjs/common';
import { hostname } from 'node:os';
import type { StampededDatabase } from '../database/stampeded-database.js';
import type { FleetListeners } from './fleet-listeners.js';
import { DEREGISTER_WORKER, HEARTBEAT, OWNED_JOBS, REGISTER_WORKER, REREGISTER_WORKER } from '../sql/workers.sql.js';

interface LostHeartbeat {
  afterMs: number;
  onLost(reason: string): void;
}

/** The worker's row in stampeded_workers: registered at start, heartbeated, removed at a clean stop. */
export class WorkerRegistration {
  private readonly logger = new Logger('Stampeded');
  private timer?: NodeJS.Timeout;
  private failing = false;

  private lastAlive = Date.now();
  private lostReported = false;

  private constructor(
    private readonly db: StampededDatabase,
    readonly workerId: string,
    private readonly queues: string[],
    private readonly metadata: Record<string, unknown>,
  ) {}

  static async register(db: StampededDatabase, queues: string[], metadata: Record<string, unknown>): Promise<WorkerRegistration> {
    const [{ id }] = await db.query<{ id: string }>(REGISTER_WORKER, [hostname(), process.pid, queues, JSON.stringify(metadata)]);
    return new WorkerRegistration(db, id, queues, metadata);
  }

  /**
   * Heartbeats every `intervalMs`. `onLost` is told, once per episode, when
   * the heartbeat has failed for `lostAfterMs` (the reaper may be about to
   * give this worker's jobs away) or found the row reaped; a reaped row is
   * put back, so that the worker goes on under its own id. `listeners`, when
   * given, hears how many connections held the job events' lock at each beat.
   */
  startHeartbeat(intervalMs: number, lost?: LostHeartbeat, listeners?: FleetListeners): void {
    this.lastAlive = Date.now();
    this.timer = setInterval(() => void this.beat(lost, listeners), intervalMs);
  }

  private async beat(lost?: LostHeartbeat, listeners?: FleetListeners): Promise<void> {
    try {
      const askedAt = Date.now();
      const rows = await this.db.query<{ id: string; event_listeners: number }>(HEARTBEAT, [this.workerId, listeners?.lock ?? null]);
      if (rows.length) listeners?.counted(rows[0].event_listeners, askedAt);
      if (rows.length === 0) {
        lost?.onLost(`worker ${this.workerId} was declared dead by the reaper while it ran (a stall longer than the reaper's threshold)`);
        await this.db.query(REREGISTER_WORKER, [this.workerId, hostname(), process.pid, this.queues, JSON.stringify(this.metadata)]);
      }
      if (this.failing) this.logger.log('worker heartbeat restored');
      this.failing = false;
      this.lostReported = false;
      this.lastAlive = Date.now();
    } catch (err) {
      if (!this.failing) this.logger.warn(`worker heartbeat failed: ${(err as Error).message}`);
      this.failing = true;
      if (lost && !this.lostReported && Date.now() - this.lastAlive >= lost.afterMs) {
        this.lostReported = true;
        lost.onLost(`worker ${this.workerId} could not heartbeat for ${Date.now() - this.lastAlive} ms (${(err as Error).message})`);
      }
    }
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
