import type { StampededDatabase } from '../database/stampeded-database.js';
import type { Job } from '../interfaces/job.interface.js';
import type { ControlGate } from '../control/control.gate.js';
import { CLAIM_BATCH, CLAIM_FAIR, CLAIM_LIMITED } from '../sql/claim.sql.js';
import { toClaimedJob } from '../queue/job.mapper.js';

/** What one claim statement answered. */
export interface ClaimAnswer {
  jobs: Job[];
  /** The most jobs the claim could have taken: fewer means it took all it could see. */
  most: number;
  /** The limited claim: how long after its statement began it counted its windows (CLAIM_LIMITED). */
  countedAfterMs?: number;
}

/** How a held claim has its queue claimed again: `wake` it, after the window frees a start or a poll interval, whichever is first. */
export interface ClaimAgain {
  wake: (queue: string) => void;
  pollIntervalMs: number;
}

/** What the claims that queue control shapes are made with: its view, and the jobs this worker claims ahead of its slots. */
export interface ControlledClaims {
  db: StampededDatabase;
  workerId: string;
  control: ControlGate;
  prefetch: () => number;
}

/** One way of claiming a queue's jobs: a statement of sql/claim.sql.ts and the arguments it takes. */
export interface Claimer {
  /** Whether its claims may start from a cursor (ClaimCursor): only the plain claim reads the claim index from one. */
  readonly cursored: boolean;
  /**
   * Up to `limit` jobs of the queue due by `now` (null: the database's
   * clock), from `after` on (epoch milliseconds; null: from the head).
   */
  claim(queue: string, limit: number, now: Date | null, after: number | null): Promise<ClaimAnswer>;
}

/** The claim of a queue without limits while no tenants compete: the head of the claim index (stampeded_claim_batch). */
export class PlainClaimer implements Claimer {
  readonly cursored = true;

  constructor(
    private readonly db: StampededDatabase,
    private readonly workerId: string,
  ) {}

  async claim(queue: string, limit: number, now: Date | null, after: number | null): Promise<ClaimAnswer> {
    const rows = await this.db.query(CLAIM_BATCH, [queue, this.workerId, limit, now, after]);
    return { jobs: rows.map((row) => toClaimedJob(row, this.workerId)), most: limit };
  }
}

/**
 * The claim while tenants compete (stampeded_claim_fair): a few jobs of each
 * tenant with room in this worker, as ControlGate.tenantClaim() says at the
 * time of the claim.
 */
export class FairClaimer implements Claimer {
  readonly cursored = false;

  constructor(private readonly on: ControlledClaims) {}

  async claim(queue: string, limit: number, now: Date | null): Promise<ClaimAnswer> {
    const { db, workerId, control, prefetch } = this.on;
    // Chosen only while tenants compete (Claimers), when this answers.
    const fair = control.tenantClaim(prefetch());
    if (!fair) return { jobs: [], most: 0 };
    const rows = await db.query(CLAIM_FAIR, [queue, workerId, limit, now, fair.tenants, fair.perTenant]);
    // It takes at most perTenant jobs of each tenant it names: one that took
    // that many left no tenant short.
    return { jobs: rows.map((row) => toClaimedJob(row, workerId)), most: Math.min(limit, fair.tenants.length * fair.perTenant) };
  }
}

/**
 * The claim of a capped or rate-limited queue (stampeded_claim_limited),
 * fair among tenants while they compete. A claim held back by a full rate
 * window has the queue claimed again when the window frees a start, rather
 * than at the next poll.
 */
export class LimitedClaimer implements Claimer {
  readonly cursored = false;
  /** Per queue: a claim when its full window frees a start. */
  private readonly heldTimers = new Map<string, NodeJS.Timeout>();
  private stopped = false;

  constructor(
    private readonly on: ControlledClaims,
    private readonly claimAgain: ClaimAgain,
  ) {}

  async claim(queue: string, limit: number, now: Date | null): Promise<ClaimAnswer> {
    const { db, workerId, control, prefetch } = this.on;
    const fair = control.tenantClaim(prefetch());
    const rows = await db.query(CLAIM_LIMITED, [queue, workerId, limit, now, control.rateRules(queue), fair?.tenants ?? null, fair?.perTenant ?? null]);
    const held = rows.find((row) => row.id === null);
    if (held) this.claimWhenFreed(queue, Number(held.held_ms));
    const claimed = rows.filter((row) => row.id !== null);
    const jobs = claimed.map((row) => toClaimedJob(row, workerId));
    return { jobs, most: limit, countedAfterMs: claimed.length ? Number(claimed[0].counted_after_ms) : undefined };
  }

  stop(): void {
    this.stopped = true;
    for (const timer of this.heldTimers.values()) clearTimeout(timer);
    this.heldTimers.clear();
  }

  private claimWhenFreed(queue: string, ms: number): void {
    if (this.stopped || this.heldTimers.has(queue)) return;
    const { wake, pollIntervalMs } = this.claimAgain;
    const timer = setTimeout(
      () => {
        this.heldTimers.delete(queue);
        wake(queue);
      },
      Math.max(1, Math.min(ms, pollIntervalMs)),
    );
    timer.unref?.();
    this.heldTimers.set(queue, timer);
  }
}

/**
 * Which claimer each queue's claims go through: the limited claim for a
 * capped or rate-limited queue, the fair claim while tenants compete, the
 * plain claim otherwise. Chosen again each time queue control reads the
 * fleet's state (a cap, a pause and the tenants change only then), not at
 * every claim.
 */
export class Claimers {
  private readonly plain: PlainClaimer;
  private readonly fair?: FairClaimer;
  private readonly limited?: LimitedClaimer;
  private readonly chosen = new Map<string, Claimer>();

  constructor(
    db: StampededDatabase,
    workerId: string,
    private readonly queues: readonly string[],
    private readonly control: ControlGate | undefined,
    prefetch: () => number,
    claimAgain: ClaimAgain,
  ) {
    this.plain = new PlainClaimer(db, workerId);
    if (control) {
      const on = { db, workerId, control, prefetch };
      this.fair = new FairClaimer(on);
      this.limited = new LimitedClaimer(on, claimAgain);
      control.onRead(() => this.choose());
    }
    this.choose();
  }

  /** The claimer of the queue until the next read. */
  of(queue: string): Claimer {
    return this.chosen.get(queue) ?? this.plain;
  }

  /** Whether tenants compete for this worker's slots (the fair claim is in use). */
  get tenantsCompete(): boolean {
    return this.control?.tenantsCompete() === true;
  }

  stop(): void {
    this.limited?.stop();
  }

  private choose(): void {
    const control = this.control;
    if (!control) return;
    const tenants = control.tenantsCompete();
    for (const queue of this.queues) {
      this.chosen.set(queue, control.limited(queue) ? this.limited! : tenants ? this.fair! : this.plain);
    }
  }
}

/**
 * The unique index on a key's running job (stampeded_jobs_ordering_running_idx,
 * migration 11) refused a claim: another claim took a job of the same key at
 * the same instant. Named by its columns, as each partition's copy of the
 * index has a name of its own.
 */
export function isOrderingRace(err: unknown): boolean {
  const { code, detail } = (err ?? {}) as { code?: string; detail?: string };
  return code === '23505' && typeof detail === 'string' && detail.startsWith('Key (queue, ordering_key)=');
}
