import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import { CANCELLED_AMONG } from '../sql/jobs.sql.js';
import type { Worker } from './worker.js';

/**
 * How a worker that cannot LISTEN learns that a job it holds was cancelled:
 * every `intervalMs`, while it holds any, one statement reads which of them
 * the database says cancelled, and the worker stops those (their AbortSignal
 * fires) as it would on the cancel notification. An idle worker asks nothing.
 * The cancel itself is fenced in the database whatever this finds: a late
 * look costs the handler's time, never a recorded outcome.
 */
export class CancelPoller {
  private readonly logger = new Logger('Stampeded');
  private timer?: NodeJS.Timeout;
  private checking = false;
  private failing = false;

  constructor(
    private readonly db: StampededDatabase,
    private readonly worker: Worker,
    private readonly intervalMs: number,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.check(), this.intervalMs);
  }

  private async check(): Promise<void> {
    if (this.checking) return;
    const held = this.worker.heldJobs();
    if (held.length === 0) return;
    this.checking = true;
    try {
      const rows = await this.db.query<{ id: string }>(CANCELLED_AMONG, [held.map((j) => j.queue), held.map((j) => j.id)]);
      for (const { id } of rows) this.worker.cancelled(id);
      this.failing = false;
    } catch (err) {
      if (!this.failing) this.logger.warn(`could not check the held jobs for cancels: ${(err as Error).message}`);
      this.failing = true;
    } finally {
      this.checking = false;
    }
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
