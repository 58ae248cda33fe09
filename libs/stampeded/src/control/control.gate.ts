import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import type { Job } from '../interfaces/job.interface.js';
import type { BreakerState } from '../interfaces/control.interface.js';
import type { FailureRecord } from '../worker/outcome-recorder.js';
import { BreakerOpenError, UnrecoverableError } from '../errors/stampeded.errors.js';
import { BREAKER_IS_OPEN, TENANT_OVER_SHARE } from '../stampeded.messages.js';
import {
  BREAKER_FAILURE,
  BREAKER_PROBE,
  BREAKER_SUCCESS,
  BREAKER_TRIP,
  READ_BREAKERS,
  READ_TENANTS,
  READ_VERDICTS,
} from '../sql/control.sql.js';
import { breakerConfigFor, type ControlConfig } from './control.config.js';

interface QueueView {
  verdict: 'steady' | 'rush' | 'hold';
  paused: boolean;
  maxRunning: number | null;
  /** Claimed plus executing across the fleet, counted when this view was read. */
  running: number | null;
  /** Live workers that claim from the queue: the free room is split between them. */
  workers: number;
  /** This worker's jobs of the queue when `running` was counted. */
  baseline?: number;
}

interface BreakerView {
  state: BreakerState;
  failures: number;
  /** Local epoch ms at which an open breaker's cooldown ends. */
  openUntil: number;
  reason: string | null;
}

interface TenantView {
  fleetRunning: number;
  waiting: boolean;
  /** This worker's running jobs of the tenant when the fleet was counted. */
  mineAtRead: number;
}

/** A little spread, so that a fleet's deferred jobs do not all come due in the same millisecond. */
const jitter = (ms: number) => Math.round(ms * (1 + Math.random() * 0.2));

/**
 * One worker's view of queue control, refreshed from the database every
 * refreshInterval: which of its queues are held or rushed and how much room a
 * capped queue has, which destinations' breakers are not closed, and how many
 * jobs each tenant runs across the fleet. The worker asks it, synchronously
 * on the hot path, where to claim and whether to run a job; only a breaker's
 * probe and breaker bookkeeping go to the database.
 */
export class ControlGate {
  private readonly logger = new Logger('Stampeded');
  private queues = new Map<string, QueueView>();
  private breakers = new Map<string, BreakerView>();
  /**
   * The breakers this worker changed itself, by the number of the change: a
   * refresh that started before a change returns the state before it, and
   * replacing the map with it reopened a window, up to a refresh interval
   * long, in which a breaker this worker had just tripped read closed and
   * its destination's next job ran (seen in test/control-breakers.e2e-spec.ts).
   */
  private readonly breakerChanges = new Map<string, number>();
  private breakerChangeCount = 0;
  private tenants = new Map<string, TenantView>();
  /** Per tenant, this worker's claimed-but-not-finished jobs, and the running ones among them. */
  private readonly claimedByTenant = new Map<string, number>();
  private readonly runningByTenant = new Map<string, number>();
  private readonly admitted = new Set<string>();
  private readonly claimedIds = new Set<string>();
  private readonly probes = new Set<string>();
  /** The worker's count of its own jobs per queue, as last handed to room(). */
  private readonly inFlightOf = new Map<string, () => number>();
  /**
   * Jobs that left the worker's hands but whose outcome is not yet written:
   * still 'executing' in the database, so still counted against max_running.
   * Leaving them out let each worker claim replacements while completions
   * were in flight, and the fleet ran at 5-10x the cap (measured).
   */
  private readonly awaitingOutcome = new Map<string, { queue: string; since: number }>();
  private timer?: NodeJS.Timeout;
  private refreshing?: Promise<void>;

  constructor(
    private readonly db: StampededDatabase,
    private readonly config: ControlConfig,
    private readonly workerId: string,
    private readonly workedQueues: string[],
    private readonly concurrency: number,
  ) {}

  /** Reads the fleet's state once before the worker claims anything (a paused queue stays paused from the first claim), then keeps reading. */
  async start(): Promise<void> {
    await this.refresh();
    this.timer = setInterval(() => void this.refresh(), this.config.refreshIntervalMs);
    this.timer.unref?.();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.refreshing;
  }

  /** A read that starts after this call: what was written before it is seen. */
  async refreshNow(): Promise<void> {
    await this.refreshing;
    await this.refresh();
  }

  refresh(): Promise<void> {
    this.refreshing ??= this.read().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  private async read(): Promise<void> {
    const changesBefore = this.breakerChangeCount;
    try {
      const [verdicts, breakers, tenants] = await Promise.all([
        this.db.query(READ_VERDICTS, [this.workedQueues, this.config.freshnessMs]),
        this.db.query(READ_BREAKERS),
        this.config.fairness ? this.db.query(READ_TENANTS, [this.workedQueues]) : Promise.resolve([]),
      ]);
      const queues = new Map<string, QueueView>();
      for (const r of verdicts) {
        const isFresh = r.fresh === true && r.decided_at !== null;
        // A verdict older than the freshness window is steady, so a dead
        // planner degrades to round robin; an operator's pause is not the
        // planner's to lose, and holds however old it is.
        queues.set(r.queue, {
          verdict: r.paused ? 'hold' : isFresh ? r.verdict : 'steady',
          paused: r.paused === true,
          maxRunning: r.max_running,
          running: r.live_running,
          workers: Math.max(1, Number(r.workers ?? 1)),
          baseline: this.mine(r.queue, this.inFlightOf.get(r.queue)),
        });
      }
      this.queues = queues;
      // An outcome that never came (the job was lost or cancelled) stops counting after a while.
      for (const [id, entry] of this.awaitingOutcome) if (Date.now() - entry.since > 10_000) this.awaitingOutcome.delete(id);
      const now = Date.now();
      const read = new Map<string, BreakerView>(
        breakers.map((r) => [r.destination, { state: r.state, failures: r.failures, openUntil: now + Number(r.open_ms), reason: null }]),
      );
      // What this worker changed while the read was under way is newer than the read.
      for (const [destination, change] of this.breakerChanges) {
        if (change <= changesBefore) continue;
        const local = this.breakers.get(destination);
        if (local) read.set(destination, local);
        else read.delete(destination);
      }
      this.breakers = read;
      this.tenants = new Map(
        tenants.map((r) => [r.tenant_id, { fleetRunning: r.running, waiting: r.waiting, mineAtRead: this.runningByTenant.get(r.tenant_id) ?? 0 }]),
      );
    } catch (err) {
      // Keep the last view: a database blip must not un-pause a queue or close a breaker.
      this.logger.warn(`queue control could not read the fleet's state (${(err as Error).message}); keeping the last view`);
    }
  }

  // ---- where to claim ----

  /** The worker's queues whose verdict is rush, to be claimed from first. */
  rushed(queues: string[]): string[] {
    if (this.queues.size === 0) return [];
    return queues.filter((q) => this.queues.get(q)?.verdict === 'rush');
  }

  /**
   * How many more jobs of the queue this worker may hold. 0 while paused.
   * With max_running, the room free at the last read (a live count, not the
   * planner's) is split between the queue's live workers, on top of what this
   * worker held then -- so a worker reuses its own finished slots at once, and
   * the planner's 'hold' for max_running is for the dashboard: the worker's
   * own count is fresher.
   */
  room(queue: string, inFlight: () => number): number {
    const view = this.queues.get(queue);
    if (!view) return Infinity;
    if (view.paused) return 0;
    if (view.maxRunning === null || view.running === null) return view.verdict === 'hold' ? 0 : Infinity;
    this.inFlightOf.set(queue, inFlight);
    const mine = this.mine(queue, inFlight)!;
    view.baseline ??= mine;
    // Over the cap, the share is negative: each worker gives up its part of the excess as its jobs finish.
    const free = view.maxRunning - view.running;
    const share = free >= 0 ? Math.ceil(free / view.workers) : -Math.ceil(-free / view.workers);
    return Math.max(0, view.baseline + share - mine);
  }

  /**
   * A queue whose room this gate counts: the worker claims it one statement
   * at a time, as it does a queue with a per-process concurrency, so that two
   * claims sent together do not both take the same room.
   */
  capped(queue: string): boolean {
    const view = this.queues.get(queue);
    return view !== undefined && (view.paused || view.maxRunning !== null);
  }

  private mine(queue: string, inFlight: (() => number) | undefined): number | undefined {
    if (!inFlight) return undefined;
    let n = inFlight();
    for (const entry of this.awaitingOutcome.values()) if (entry.queue === queue) n++;
    return n;
  }

  /**
   * While tenants compete (fairness on, more than one with work): the
   * tenants with work and with room in this worker, and the most jobs of any
   * one a claim takes. Undefined otherwise: the plain claim.
   */
  tenantClaim(): { tenants: string[]; perTenant: number } | undefined {
    if (!this.config.fairness) return undefined;
    let active = 0;
    for (const view of this.tenants.values()) if (view.waiting || view.fleetRunning > 0) active++;
    if (active < 2) return undefined;
    const tenants: string[] = [];
    // Up to twice the share claimed: one share running, one waiting in the
    // buffer, so that a finished job's slot does not wait for a claim.
    for (const [tenant, view] of this.tenants) {
      if (view.waiting && (this.claimedByTenant.get(tenant) ?? 0) < 2 * this.share(tenant)) tenants.push(tenant);
    }
    return { tenants, perTenant: Math.max(1, Math.floor(this.concurrency / active)) };
  }

  claimed(jobs: Job[]): void {
    if (!this.config.fairness) return;
    for (const job of jobs) {
      if (job.tenantId === null) continue;
      this.claimedIds.add(job.id);
      this.claimedByTenant.set(job.tenantId, (this.claimedByTenant.get(job.tenantId) ?? 0) + 1);
    }
  }

  // ---- whether to run ----

  /** Whether the job's tenant has room under its share now: no side effects, for choosing what to start. */
  withinShare(job: Job): boolean {
    return job.tenantId === null || !this.config.fairness || this.overShare(job.tenantId) === undefined;
  }

  /**
   * Undefined to run the job; otherwise why not, as a failure that refunds
   * the attempt (throttled, breaker_open). Synchronous unless a breaker's
   * cooldown has ended and the probe must be asked for.
   */
  admit(job: Job): FailureRecord | Promise<FailureRecord | undefined> | undefined {
    if (job.tenantId !== null && this.config.fairness) {
      const refusal = this.overShare(job.tenantId);
      if (refusal) return refusal;
    }
    if (job.destination !== null) {
      const breaker = this.breakers.get(job.destination);
      if (breaker && breaker.state !== 'closed') {
        const waitMs = breaker.openUntil - Date.now();
        if (breaker.state === 'open' && waitMs > 0) return this.deferForBreaker(job.destination, waitMs, breaker.reason);
        return this.askForProbe(job).then((failure) => failure ?? this.markRunning(job));
      }
    }
    return this.markRunning(job);
  }

  /** A breaker as this worker now knows it (undefined: closed), newer than any read under way. */
  private setBreaker(destination: string, view: BreakerView | undefined): void {
    if (view) this.breakers.set(destination, view);
    else this.breakers.delete(destination);
    this.breakerChanges.set(destination, ++this.breakerChangeCount);
  }

  private markRunning(job: Job): undefined {
    if (job.tenantId !== null && this.config.fairness) {
      this.admitted.add(job.id);
      this.runningByTenant.set(job.tenantId, (this.runningByTenant.get(job.tenantId) ?? 0) + 1);
    }
    return undefined;
  }

  private othersWaiting(tenant: string): boolean {
    for (const [other, view] of this.tenants) if (other !== tenant && view.waiting) return true;
    return false;
  }

  /** This worker's slots for the tenant: its weight over the weights of the tenants with work. */
  private share(tenant: string): number {
    const fairness = this.config.fairness!;
    const weight = (t: string) => fairness.weights.get(t) ?? 1;
    const active = new Set<string>([tenant]);
    for (const [t, view] of this.tenants) if (view.waiting || view.fleetRunning > 0) active.add(t);
    for (const [t, n] of this.runningByTenant) if (n > 0) active.add(t);
    let total = 0;
    for (const t of active) total += weight(t);
    return Math.max(1, Math.floor((this.concurrency * weight(tenant)) / total));
  }

  private overShare(tenant: string): FailureRecord | undefined {
    const fairness = this.config.fairness!;
    const mine = this.runningByTenant.get(tenant) ?? 0;
    const view = this.tenants.get(tenant);
    const cap = fairness.maxRunning.get(tenant) ?? fairness.defaultMaxRunning;
    if (cap !== Infinity) {
      const others = view ? Math.max(0, view.fleetRunning - view.mineAtRead) : 0;
      if (others + mine >= cap) return this.throttle(tenant, others + mine, cap);
    }
    if (!this.othersWaiting(tenant)) return undefined;
    const share = this.share(tenant);
    return mine >= share ? this.throttle(tenant, mine, share) : undefined;
  }

  private throttle(tenant: string, running: number, share: number): FailureRecord {
    return { kind: 'throttled', error: TENANT_OVER_SHARE(tenant, running, share), retryDelayMs: jitter(this.config.fairness!.retryDelayMs) };
  }

  private deferForBreaker(destination: string, waitMs: number, reason: string | null): FailureRecord {
    return { kind: 'breaker_open', error: BREAKER_IS_OPEN(destination, waitMs, reason), retryDelayMs: jitter(Math.max(1, waitMs)) };
  }

  /** The cooldown is over: one job in the fleet runs as the probe, the rest wait a little longer. */
  private async askForProbe(job: Job): Promise<FailureRecord | undefined> {
    const destination = job.destination!;
    const cooldownMs = breakerConfigFor(this.config, destination).cooldownMs;
    try {
      const [row] = await this.db.query(BREAKER_PROBE, [destination, this.workerId, cooldownMs]);
      if (row.verdict === 'probe') {
        this.probes.add(job.id);
        return undefined;
      }
      if (row.verdict === 'closed') {
        this.setBreaker(destination, undefined);
        return undefined;
      }
      const waitMs = row.verdict === 'open' ? Number(row.wait_ms) : Math.min(Number(row.wait_ms), Math.max(250, cooldownMs / 4));
      this.setBreaker(destination, { state: row.verdict, failures: 0, openUntil: Date.now() + Number(row.wait_ms), reason: null });
      return this.deferForBreaker(destination, Math.max(250, waitMs), null);
    } catch (err) {
      this.logger.warn(`could not ask for the probe of destination "${destination}" (${(err as Error).message}); deferring its job`);
      return this.deferForBreaker(destination, cooldownMs, null);
    }
  }

  // ---- what happened ----

  /** A job left this worker's hands: finished, refused or given back. */
  settled(job: Job): void {
    if (this.queues.get(job.queue)?.maxRunning != null) this.awaitingOutcome.set(job.id, { queue: job.queue, since: Date.now() });
    if (job.tenantId === null || !this.config.fairness) return;
    if (this.claimedIds.delete(job.id)) decrement(this.claimedByTenant, job.tenantId);
    if (this.admitted.delete(job.id)) decrement(this.runningByTenant, job.tenantId);
  }

  /** A handler threw. Returns the failure to record: a breaker's doing is deferred, not failed. */
  /** The job's outcome is written (or was not ours to write). */
  recorded(job: Job): void {
    this.awaitingOutcome.delete(job.id);
  }

  async failed(job: Job, err: unknown, failure: FailureRecord): Promise<FailureRecord> {
    const destination = job.destination;
    const probe = this.probes.delete(job.id);
    if (err instanceof BreakerOpenError) {
      if (!destination) return { kind: 'raised', error: failure.error, retryDelayMs: Math.max(0, err.cooldownMs) };
      try {
        await this.db.query(BREAKER_TRIP, [destination, Math.max(1, Math.round(err.cooldownMs)), 'handler', err.message]);
        this.setBreaker(destination, { state: 'open', failures: 0, openUntil: Date.now() + err.cooldownMs, reason: err.message });
      } catch (tripErr) {
        this.logger.warn(`could not open the breaker of destination "${destination}" (${(tripErr as Error).message})`);
      }
      return { kind: 'breaker_open', error: failure.error, retryDelayMs: jitter(Math.max(1, err.cooldownMs)) };
    }
    if (!destination || err instanceof UnrecoverableError) return failure;
    const breaker = breakerConfigFor(this.config, destination);
    if (!breaker.enabled) return failure;
    try {
      const [row] = await this.db.query(BREAKER_FAILURE, [
        destination, breaker.threshold, breaker.windowMs, breaker.cooldownMs, firstLine(failure.error), probe,
      ]);
      const openMs = Number(row.open_ms);
      this.setBreaker(destination, {
        state: row.state, failures: row.state === 'closed' ? 1 : 0, openUntil: Date.now() + openMs, reason: firstLine(failure.error),
      });
      if (row.state === 'open' && !probe && row.was_open) {
        // The breaker opened while this job ran, on other jobs' evidence:
        // this failure is the destination's, not the job's.
        return { kind: 'breaker_open', error: failure.error, retryDelayMs: jitter(Math.max(1, openMs)) };
      }
    } catch (breakerErr) {
      this.logger.warn(`could not count a failure of destination "${destination}" (${(breakerErr as Error).message})`);
    }
    return failure;
  }

  /** A job completed: a probe's success closes its breaker; any success clears the count of recent failures. */
  completed(job: Job): void {
    this.awaitingOutcome.delete(job.id);
    const destination = job.destination;
    if (!destination) return;
    const probe = this.probes.delete(job.id);
    const breaker = this.breakers.get(destination);
    if (!probe && (!breaker || (breaker.state === 'closed' && breaker.failures === 0))) return;
    this.db
      .query(BREAKER_SUCCESS, [destination, probe])
      .then(([row]) => {
        if (row?.state === 'closed') this.setBreaker(destination, undefined);
      })
      .catch((err: unknown) => this.logger.warn(`could not record a success of destination "${destination}" (${(err as Error).message})`));
  }
}

function decrement(counts: Map<string, number>, key: string): void {
  const n = (counts.get(key) ?? 0) - 1;
  if (n > 0) counts.set(key, n);
  else counts.delete(key);
}

function firstLine(text: string): string {
  const newline = text.indexOf('\n');
  return newline < 0 ? text : text.slice(0, newline);
}
