import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import type { Job } from '../interfaces/job.interface.js';
import type { BreakerState } from '../interfaces/control.interface.js';
import type { FailureRecord } from '../worker/outcome-recorder.js';
import { BreakerOpenError, ResultError, UnrecoverableError } from '../errors/stampeded.errors.js';
import { BREAKER_IS_OPEN } from '../stampeded.messages.js';
import { BREAKER_FAILURE, BREAKER_PROBE, BREAKER_SUCCESS, BREAKER_TRIP } from '../sql/control.sql.js';
import { breakerConfigFor, type ControlConfig } from './control.config.js';
import { deferral } from './deferral.js';

/** One row of READ_BREAKERS (sql/control.sql.ts). */
export interface BreakerRow {
  destination: string;
  state: BreakerState;
  failures: number;
  open_ms: number | string;
}

export interface BreakerView {
  state: BreakerState;
  failures: number;
  /** Local epoch ms at which an open breaker's cooldown ends. */
  openUntil: number;
  reason: string | null;
}

/** What a job of a destination does, by the breaker as this worker knows it. */
export type BreakerAdmission = { action: 'run' } | { action: 'defer'; waitMs: number } | { action: 'probe' };

/** Shortest deferral while another job probes a destination. */
const PROBE_WAIT_FLOOR_MS = 250;

export function breakerAdmission(view: BreakerView | undefined, now: number): BreakerAdmission {
  if (!view || view.state === 'closed') return { action: 'run' };
  const waitMs = view.openUntil - now;
  if (view.state === 'open' && waitMs > 0) return { action: 'defer', waitMs };
  return { action: 'probe' };
}

/**
 * How long a job waits when the probe went to another worker's job: to the
 * end of a (re)opened breaker's cooldown, and while another job probes, a
 * quarter of the cooldown at most, so that the destination's jobs follow a
 * successful probe soon.
 */
export function probeDeferralMs(verdict: 'open' | 'half_open', waitMs: number, cooldownMs: number): number {
  const wait = verdict === 'open' ? waitMs : Math.min(waitMs, Math.max(PROBE_WAIT_FLOOR_MS, cooldownMs / 4));
  return Math.max(PROBE_WAIT_FLOOR_MS, wait);
}

/**
 * The breakers after a read: the rows read, except that what this worker
 * changed while the read was under way (a change numbered after
 * `changesBefore`) is newer than the read and is kept.
 */
export function mergeBreakerRead(
  read: Map<string, BreakerView>,
  local: ReadonlyMap<string, BreakerView>,
  changes: ReadonlyMap<string, number>,
  changesBefore: number,
): Map<string, BreakerView> {
  for (const [destination, change] of changes) {
    if (change <= changesBefore) continue;
    const view = local.get(destination);
    if (view) read.set(destination, view);
    else read.delete(destination);
  }
  return read;
}

/**
 * Whether a success is worth a statement: a probe's success closes its
 * breaker, and any success clears a count of recent failures; a destination
 * with neither is left alone.
 */
export function successMatters(probe: boolean, view: BreakerView | undefined): boolean {
  return probe || (view !== undefined && !(view.state === 'closed' && view.failures === 0));
}

/**
 * The breaker gate: which destinations' breakers are not closed, the probe
 * that tests one after its cooldown, and the failures and successes that
 * move them. Its bookkeeping goes to the database (the breaker functions);
 * the worker's question, whether to run a job, is answered from memory
 * unless a cooldown has ended.
 */
export class BreakerGate {
  private readonly logger = new Logger('Stampeded');
  private views = new Map<string, BreakerView>();
  /**
   * The breakers this worker changed itself, by the number of the change: a
   * refresh that started before a change returns the state before it, and
   * replacing the map with it would reopen a window, up to a refresh
   * interval long, in which a breaker this worker has just tripped reads
   * closed and its destination's next job runs.
   */
  private readonly changes = new Map<string, number>();
  private changeCount = 0;
  private readonly probes = new Set<string>();

  constructor(
    private readonly db: StampededDatabase,
    private readonly config: ControlConfig,
    private readonly workerId: string,
  ) {}

  /** Marks the start of a read; pass it to apply() with the rows. */
  readStarted(): number {
    return this.changeCount;
  }

  apply(rows: BreakerRow[], readStarted: number, now = Date.now()): void {
    const read = new Map<string, BreakerView>(
      rows.map((r) => [r.destination, { state: r.state, failures: r.failures, openUntil: now + Number(r.open_ms), reason: null }]),
    );
    this.views = mergeBreakerRead(read, this.views, this.changes, readStarted);
  }

  /**
   * Undefined to run the job; otherwise the deferral (breaker_open).
   * Synchronous unless a breaker's cooldown has ended and the probe must be
   * asked for, or a job the breaker deferred is due while it reads open.
   */
  admit(job: Job): FailureRecord | Promise<FailureRecord | undefined> | undefined {
    if (job.destination === null) return undefined;
    const view = this.views.get(job.destination);
    const admission = breakerAdmission(view, Date.now());
    if (admission.action === 'run') return undefined;
    if (admission.action === 'defer') {
      // A job a breaker deferred is due before the cooldown this view knows
      // ends: most often an operator closed the breaker, which makes its
      // jobs due at once (stampeded_breaker_reset), and this view was read
      // before. Deferred again from memory, the job would wait out a
      // cooldown that no longer applies; the database says what holds.
      if (job.failureKind === 'breaker_open') return this.askForProbe(job);
      return this.defer(job.destination, admission.waitMs, view!.reason);
    }
    return this.askForProbe(job);
  }

  /**
   * A handler threw `err` (written as `error`). A breaker's doing is deferred,
   * not failed: returns that deferral, or undefined when the failure is the
   * job's own, for the task's retry policy (worker/retry-policy.ts).
   */
  async failed(job: Job, err: unknown, error: string): Promise<FailureRecord | undefined> {
    const destination = job.destination;
    const probe = this.probes.delete(job.id);
    if (err instanceof BreakerOpenError && destination) {
      try {
        await this.db.query(BREAKER_TRIP, [destination, Math.max(1, Math.round(err.cooldownMs)), 'handler', err.message]);
        this.set(destination, { state: 'open', failures: 0, openUntil: Date.now() + err.cooldownMs, reason: err.message });
      } catch (tripErr) {
        this.logger.warn(`could not open the breaker of destination "${destination}" (${(tripErr as Error).message})`);
      }
      return deferral('breaker_open', error, Math.max(1, err.cooldownMs));
    }
    // A result too large to store is the task's doing: the destination answered.
    if (!destination || err instanceof UnrecoverableError || err instanceof ResultError) return undefined;
    const breaker = breakerConfigFor(this.config, destination);
    if (!breaker.enabled) return undefined;
    try {
      const [row] = await this.db.query(BREAKER_FAILURE, [destination, breaker.threshold, breaker.windowMs, breaker.cooldownMs, firstLine(error), probe]);
      const openMs = Number(row.open_ms);
      this.set(destination, {
        state: row.state,
        failures: row.state === 'closed' ? 1 : 0,
        openUntil: Date.now() + openMs,
        reason: firstLine(error),
      });
      if (row.state === 'open' && !probe && row.was_open) {
        // The breaker opened while this job ran, on other jobs' evidence:
        // this failure is the destination's, not the job's.
        return deferral('breaker_open', error, Math.max(1, openMs));
      }
    } catch (breakerErr) {
      this.logger.warn(`could not count a failure of destination "${destination}" (${(breakerErr as Error).message})`);
    }
    return undefined;
  }

  /** A job completed: a probe's success closes its breaker; any success clears the count of recent failures. */
  completed(job: Job): void {
    const destination = job.destination;
    if (!destination) return;
    const probe = this.probes.delete(job.id);
    if (!successMatters(probe, this.views.get(destination))) return;
    this.db
      .query(BREAKER_SUCCESS, [destination, probe])
      .then(([row]) => {
        if (row?.state === 'closed') this.set(destination, undefined);
      })
      .catch((err: unknown) => this.logger.warn(`could not record a success of destination "${destination}" (${(err as Error).message})`));
  }

  /** A breaker as this worker now knows it (undefined: closed), newer than any read under way. */
  private set(destination: string, view: BreakerView | undefined): void {
    if (view) this.views.set(destination, view);
    else this.views.delete(destination);
    this.changes.set(destination, ++this.changeCount);
  }

  private defer(destination: string, waitMs: number, reason: string | null): FailureRecord {
    return deferral('breaker_open', BREAKER_IS_OPEN(destination, waitMs, reason), Math.max(1, waitMs));
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
        this.set(destination, undefined);
        return undefined;
      }
      this.set(destination, { state: row.verdict, failures: 0, openUntil: Date.now() + Number(row.wait_ms), reason: null });
      return this.defer(destination, probeDeferralMs(row.verdict, Number(row.wait_ms), cooldownMs), null);
    } catch (err) {
      this.logger.warn(`could not ask for the probe of destination "${destination}" (${(err as Error).message}); deferring its job`);
      return this.defer(destination, cooldownMs, null);
    }
  }
}

function firstLine(text: string): string {
  const newline = text.indexOf('\n');
  return newline < 0 ? text : text.slice(0, newline);
}
