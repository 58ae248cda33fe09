import { randomUUID } from 'node:crypto';
import type { StampededDatabase } from '../database/stampeded-database.js';
import { GIVE_UP_LEASE, RENEW_LEASE, TAKE_LEASE } from '../sql/maintenance.sql.js';
import { LeaderLoop, type LeaderElectionHandlers } from './leader-loop.js';

/** The lease lasts this many leader checks past its last renewal. */
export const LEASE_CHECKS = 3;

/**
 * One maintenance leader per schema where no session outlives a transaction
 * (a transaction-mode pooler): a lease row (migration 12) that the leader
 * renews at every check, and that a follower takes over once it has expired.
 *
 * What it costs against the session lock of LeaderElection: a leader that
 * dies is replaced only once its lease runs out (LEASE_CHECKS leader checks
 * after its last renewal, then up to one more check), and the leader writes
 * its row at every check. What it needs of clocks: nothing. The expiry is
 * the database's time; the leader trusts its lease only until its own
 * monotonic time says LEASE_CHECKS intervals have passed since it sent the
 * renewal, which is no later than the database's expiry however the clocks
 * differ.
 *
 * Fencing by term: the renewal names the term it holds, so a leader that
 * stalled past its expiry (a long pause, a partition) while another took the
 * row renews nothing and steps down, and the new term's holder leads alone.
 * Between the stall and its step-down a stale leader may run one more tick,
 * which every maintenance service tolerates (SKIP LOCKED, fenced updates).
 */
export class LeaderLease extends LeaderLoop {
  private readonly holder = randomUUID();
  private readonly leaseMs: number;
  private term?: string;
  /** Until when (performance.now()) this process may act as the leader without renewing. */
  private trustedUntil = 0;

  constructor(
    private readonly db: StampededDatabase,
    intervalMs: number,
    private readonly handlers: LeaderElectionHandlers,
    private readonly name = 'maintenance',
  ) {
    super(intervalMs);
    this.leaseMs = intervalMs * LEASE_CHECKS;
  }

  get isLeader(): boolean {
    return this.term !== undefined && performance.now() < this.trustedUntil;
  }

  protected async checkOnce(): Promise<void> {
    const sentAt = performance.now();
    try {
      if (this.term !== undefined) {
        const term = this.term;
        const rows = await this.db.query<{ term: string }>(RENEW_LEASE, [this.name, this.holder, term, this.leaseMs]);
        if (!rows.length) {
          this.depose(`the lease of term ${term} expired before it was renewed, and may have passed to another process`);
        } else if (sentAt >= this.trustedUntil) {
          // Renewed, but after this process stopped trusting it: its services
          // stopped meanwhile. Handed back, to be taken again cleanly.
          this.depose(`the lease of term ${term} was renewed only after it could no longer be trusted`);
          await this.db.query(GIVE_UP_LEASE, [this.name, this.holder, term]).catch(() => {});
        } else {
          this.trustedUntil = sentAt + this.leaseMs;
        }
      } else {
        const rows = await this.db.query<{ term: string }>(TAKE_LEASE, [this.name, this.holder, this.leaseMs]);
        if (!rows.length) return;
        this.term = rows[0].term;
        this.trustedUntil = sentAt + this.leaseMs;
        if (this.stopped) await this.giveUp();
        else this.handlers.onElected();
      }
    } catch (err) {
      // A failed renewal is not yet a lost lease: it lasts until it expires.
      if (this.term !== undefined && performance.now() >= this.trustedUntil) {
        this.depose(`the lease of term ${this.term} could not be renewed before it expired: ${(err as Error).message}`);
      }
    }
  }

  private depose(reason: string): void {
    if (this.term === undefined) return;
    this.term = undefined;
    this.trustedUntil = 0;
    this.handlers.onDeposed(reason);
  }

  private async giveUp(): Promise<void> {
    const term = this.term;
    this.term = undefined;
    this.trustedUntil = 0;
    if (term !== undefined) await this.db.query(GIVE_UP_LEASE, [this.name, this.holder, term]).catch(() => {});
  }

  /** Steps down, expiring the lease so that a follower need not wait it out. */
  async stop(): Promise<void> {
    await this.stopChecks();
    await this.giveUp();
  }
}
