import type { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import type { Job } from '../interfaces/job.interface.js';
import { UNKNOWN_CLAIMS } from '../sql/claim.sql.js';
import { LOST_CLAIMS_GIVEN_BACK } from '../stampeded.messages.js';
import { isConnectionError, type OutcomeRecorder } from './outcome-recorder.js';

/**
 * A claim whose answer was lost with its connection (a restarted server, a
 * cut connection) may have committed all the same: its jobs are ours in the
 * database and unknown here, and would sit 'executing' until their
 * expire_seconds (an hour by default); the fault suite's PostgreSQL restart
 * checks it (test/reliability/chaos.e2e-spec.ts). Once the database answers
 * and no claim is in flight, they are given back without spending an
 * attempt. Only jobs claimed after the last one a claim handed us: a job we
 * did receive, whose outcome may still be on its way, is never among them.
 */
export class LostClaims {
  /** Claim statements awaiting their answer. */
  private inFlight = 0;
  /** A claim failed on its connection: it may have committed jobs that never reached us. */
  private possible = false;
  /** The latest claim time (database clock, ms) of any job a claim handed us. */
  private lastClaimAt = 0;

  constructor(
    private readonly db: StampededDatabase,
    private readonly recorder: OutcomeRecorder,
    private readonly workerId: string,
    private readonly logger: Logger,
  ) {}

  /** Runs a claim statement, noting whether its answer was lost with its connection. */
  async track<T>(claim: () => Promise<T>): Promise<T> {
    this.inFlight++;
    try {
      return await claim();
    } catch (err) {
      if (isConnectionError(err)) this.possible = true;
      throw err;
    } finally {
      this.inFlight--;
    }
  }

  /** A claim handed us these jobs. */
  received(jobs: readonly Job[]): void {
    for (const job of jobs) {
      const claimedAt = job.claimedAt ? job.claimedAt.getTime() : 0;
      if (claimedAt > this.lastClaimAt) this.lastClaimAt = claimedAt;
    }
  }

  /** Gives back the jobs of lost answers, if a claim may have lost one; `held`: whether this worker has the job (running or buffered). */
  async giveBack(held: (jobId: string) => boolean): Promise<void> {
    if (!this.possible || this.inFlight > 0) return;
    const rows = await this.db.query<{ id: string; queue: string; attempt: number }>(UNKNOWN_CLAIMS, [this.workerId, new Date(this.lastClaimAt).toISOString()]);
    this.possible = false;
    const unknown = rows.filter((r) => !held(r.id));
    if (!unknown.length) return;
    this.logger.warn(LOST_CLAIMS_GIVEN_BACK(unknown.length));
    await Promise.all(unknown.map((r) => this.recorder.release({ id: r.id, queue: r.queue, attempt: r.attempt } as Job)));
  }
}
