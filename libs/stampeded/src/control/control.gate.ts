import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import type { Job } from '../interfaces/job.interface.js';
import type { FailureRecord } from '../worker/outcome-recorder.js';
import { READ_BREAKERS, READ_TENANTS, READ_VERDICTS } from '../sql/control.sql.js';
import { rateLimitClaimFor, type ControlConfig, type RateLimitClaim } from './control.config.js';
import { BreakerGate, type BreakerRow } from './breaker.gate.js';
import { FairnessGate, type TenantRow } from './fairness.gate.js';
import { VerdictGate, type VerdictRow } from './verdict.gate.js';

/** The most often arrivals re-read the tenants (ControlGate.arrived). */
export const ARRIVAL_READ_MS = 100;

/**
 * One worker's view of queue control, refreshed from the database every
 * refreshInterval, and the one object the worker asks: where to claim (the
 * queues' verdicts and caps, verdict.gate.ts; the tenants' shares,
 * fairness.gate.ts) and whether to run a job (its tenant's share, its
 * destination's breaker, breaker.gate.ts). The worker asks synchronously on
 * the hot path; only a breaker's probe and breaker bookkeeping go to the
 * database.
 */
export class ControlGate {
  private readonly logger = new Logger('Stampeded');
  private readonly verdicts = new VerdictGate();
  private readonly breakers: BreakerGate;
  /** Present when fairness is on. */
  private readonly fairness?: FairnessGate;
  private timer?: NodeJS.Timeout;
  private refreshing?: Promise<void>;
  /** Per queue, the rate limits of its claims (rateLimitClaimFor); null for none. */
  private readonly rateLimits = new Map<string, RateLimitClaim | null>();
  private readonly wakeListeners: ((queue: string) => void)[] = [];
  private readonly readListeners: (() => void)[] = [];
  /** When the tenants were last read (Date.now()), and the read that arrivals asked for. */
  private tenantsReadAt = 0;
  private arrivalRead?: NodeJS.Timeout;

  constructor(
    private readonly db: StampededDatabase,
    private readonly config: ControlConfig,
    workerId: string,
    private readonly workedQueues: string[],
    concurrency: number,
  ) {
    this.breakers = new BreakerGate(db, config, workerId);
    if (config.fairness) this.fairness = new FairnessGate(config.fairness, concurrency);
  }

  /** Reads the fleet's state once before the worker claims anything (a paused queue stays paused from the first claim), then keeps reading. */
  async start(): Promise<void> {
    await this.refresh();
    this.timer = setInterval(() => void this.refresh(), this.config.refreshIntervalMs);
    this.timer.unref?.();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    clearTimeout(this.arrivalRead);
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
    const breakersReadStarted = this.breakers.readStarted();
    if (this.fairness) this.tenantsReadAt = Date.now();
    try {
      const [verdicts, breakers, tenants] = await Promise.all([
        this.db.query<VerdictRow>(READ_VERDICTS, [this.workedQueues, this.config.freshnessMs]),
        this.db.query<BreakerRow>(READ_BREAKERS),
        this.fairness ? this.db.query<TenantRow>(READ_TENANTS, [this.workedQueues]) : Promise.resolve([]),
      ]);
      this.verdicts.apply(verdicts);
      this.breakers.apply(breakers, breakersReadStarted);
      this.fairness?.apply(tenants);
      this.wasRead();
    } catch (err) {
      // Keep the last view: a database blip must not un-pause a queue or close a breaker.
      this.logger.warn(`queue control could not read the fleet's state (${(err as Error).message}); keeping the last view`);
    }
  }

  // ---- where to claim ----

  /** The worker's queues whose verdict is rush, to be claimed from first. */
  rushed(queues: string[]): string[] {
    return this.verdicts.rushed(queues);
  }

  /** How many more jobs of the queue this worker may claim: 0 while paused (verdict.gate.ts). */
  room(queue: string): number {
    return this.verdicts.room(queue);
  }

  /** A queue to be claimed one statement at a time: paused, capped or rate limited. */
  counted(queue: string): boolean {
    return this.verdicts.counted(queue) || this.rateRules(queue) !== null;
  }

  /**
   * A queue claimed through CLAIM_LIMITED: it has max_running, or rate limits
   * its jobs may fall under. Its claims take only what this worker can start
   * at once, since a claimed job counts against the cap and the windows.
   */
  limited(queue: string): boolean {
    return this.verdicts.capped(queue) || this.rateRules(queue) !== null;
  }

  /** The rate-limit rules of the queue's claims, as JSON; null when none apply. */
  rateRules(queue: string): string | null {
    return this.rateLimitClaim(queue)?.rules ?? null;
  }

  /**
   * How long after its claim was sent a job of the queue may still start
   * (START_GRACE in control.config.ts); undefined: any time, no limit applies.
   */
  startGraceMs(queue: string): number | undefined {
    return this.rateLimitClaim(queue)?.startGraceMs;
  }

  private rateLimitClaim(queue: string): RateLimitClaim | null {
    let claim = this.rateLimits.get(queue);
    if (claim === undefined) this.rateLimits.set(queue, (claim = rateLimitClaimFor(this.config.rateLimits, queue)));
    return claim;
  }

  /**
   * Called with a queue to claim from now: a capped queue whose job's
   * outcome is written here (its slot is free), or a queue whose tenants
   * were just re-read on an arrival (the claim's shares changed).
   */
  onWake(listener: (queue: string) => void): void {
    this.wakeListeners.push(listener);
  }

  /**
   * Jobs were enqueued on one of the worker's queues (an insert
   * notification). With fairness on, a tenant that just arrived gets its
   * share from the next claim, not from the next refresh: the tenants are
   * re-read at once, at most once per ARRIVAL_READ_MS, and the queue is
   * claimed again. Without arrivals this costs nothing.
   */
  arrived(queue: string): void {
    if (!this.fairness || this.arrivalRead || !this.workedQueues.includes(queue)) return;
    const wait = Math.max(0, this.tenantsReadAt + ARRIVAL_READ_MS - Date.now());
    this.arrivalRead = setTimeout(() => void this.readTenants(queue), wait);
    this.arrivalRead.unref?.();
  }

  private async readTenants(queue: string): Promise<void> {
    this.tenantsReadAt = Date.now();
    try {
      this.fairness?.apply(await this.db.query<TenantRow>(READ_TENANTS, [this.workedQueues]));
      this.wasRead();
    } catch (err) {
      this.logger.warn(`queue control could not read the tenants (${(err as Error).message}); keeping the last view`);
    } finally {
      this.arrivalRead = undefined;
    }
    this.wake(queue);
  }

  /** Called after each read of the fleet's state (verdicts, caps, tenants): what depends on them is decided again then. */
  onRead(listener: () => void): void {
    this.readListeners.push(listener);
  }

  private wasRead(): void {
    for (const listener of this.readListeners) listener();
  }

  private wake(queue: string): void {
    for (const listener of this.wakeListeners) listener(queue);
  }

  /**
   * While tenants compete: which tenants to claim for, and how many each
   * (`prefetch`: the jobs the worker holds claimed ahead). Undefined: the plain claim.
   */
  tenantClaim(prefetch = 0): { tenants: string[]; perTenant: number } | undefined {
    return this.fairness?.claim(prefetch);
  }

  /** Whether more than one tenant has work: claims are then fair (tenantClaim()). Changes only when the tenants are read. */
  tenantsCompete(): boolean {
    return this.fairness?.competing() === true;
  }

  /** While tenants compete, the buffered job of the lowest rank starts first (FairnessGate.startRank). */
  startRank(job: Job): number {
    return this.fairness ? this.fairness.startRank(job) : 0;
  }

  claimed(jobs: Job[]): void {
    this.fairness?.claimed(jobs);
  }

  // ---- whether to run ----

  /** Whether the job's tenant has room under its share now: no side effects, for choosing what to start. */
  withinShare(job: Job): boolean {
    return !this.fairness || this.fairness.withinShare(job);
  }

  /**
   * Undefined to run the job; otherwise why not, as a failure that refunds
   * the attempt (throttled, breaker_open). Synchronous unless the breaker
   * must be asked (BreakerGate.admit).
   */
  admit(job: Job): FailureRecord | Promise<FailureRecord | undefined> | undefined {
    const throttled = this.fairness?.refusal(job);
    if (throttled) return throttled;
    const breaker = this.breakers.admit(job);
    if (breaker instanceof Promise) return breaker.then((failure) => failure ?? this.running(job));
    return breaker ?? this.running(job);
  }

  private running(job: Job): undefined {
    this.fairness?.running(job);
    return undefined;
  }

  // ---- what happened ----

  /** A job left this worker's hands: finished, refused or given back. */
  settled(job: Job): void {
    this.fairness?.settled(job);
  }

  /**
   * The job's outcome is written (or was not ours to write). Under a cap the
   * job counted until now, so the claim for its slot goes after the write,
   * not when the handler returned: claimed before, it would find the cap
   * still full.
   */
  recorded(job: Job): void {
    if (this.verdicts.capped(job.queue)) this.wake(job.queue);
  }

  /** A handler threw: the breaker's deferral, or undefined when the failure is the job's own (see BreakerGate.failed). */
  failed(job: Job, err: unknown, error: string): Promise<FailureRecord | undefined> {
    return this.breakers.failed(job, err, error);
  }

  /** A job completed: its outcome is written, and its destination's breaker hears of the success. */
  completed(job: Job): void {
    this.recorded(job);
    this.breakers.completed(job);
  }
}
