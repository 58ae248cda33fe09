import type { Job } from '../interfaces/job.interface.js';
import type { FailureRecord } from '../worker/outcome-recorder.js';
import { TENANT_OVER_SHARE } from '../stampeded.messages.js';
import type { FairnessConfig } from './control.config.js';
import { deferral } from './deferral.js';

/** One row of READ_TENANTS (sql/control.sql.ts). */
export interface TenantRow {
  tenant_id: string;
  running: number;
  waiting: boolean;
}

export interface TenantView {
  fleetRunning: number;
  waiting: boolean;
  /** This worker's running jobs of the tenant when the fleet was counted. */
  mineAtRead: number;
}

/** What the fair-share decisions read: the fleet as last read, and this worker's own counts. */
export interface TenantCounts {
  fleet: ReadonlyMap<string, TenantView>;
  /** This worker's running jobs per tenant. */
  running: ReadonlyMap<string, number>;
  /** This worker's claimed and not finished jobs per tenant (running or buffered). */
  claimed?: ReadonlyMap<string, number>;
}

/** A tenant over its limit: what it runs, and the limit (a fleet-wide cap, or its share). */
export interface OverShare {
  running: number;
  limit: number;
}

/** Tenants with work: waiting or running across the fleet. */
function competing(fleet: ReadonlyMap<string, TenantView>): string[] {
  return [...fleet].filter(([, view]) => view.waiting || view.fleetRunning > 0).map(([tenant]) => tenant);
}

/** This worker's slots for the tenant: its weight over the weights of the tenants with work. */
export function tenantShare(tenant: string, counts: TenantCounts, fairness: FairnessConfig, concurrency: number): number {
  const weight = (t: string) => fairness.weights.get(t) ?? 1;
  const active = new Set<string>([tenant, ...competing(counts.fleet)]);
  for (const [t, n] of counts.running) if (n > 0) active.add(t);
  let total = 0;
  for (const t of active) total += weight(t);
  return Math.max(1, Math.floor((concurrency * weight(tenant)) / total));
}

/**
 * Whether one more job of the tenant would put it over its fleet-wide cap, or
 * (while other tenants wait) over its share of this worker's slots.
 * Undefined: it may run.
 */
export function overShare(tenant: string, counts: TenantCounts, fairness: FairnessConfig, concurrency: number): OverShare | undefined {
  const mine = counts.running.get(tenant) ?? 0;
  const cap = fairness.maxRunning.get(tenant) ?? fairness.defaultMaxRunning;
  if (cap !== Infinity) {
    const view = counts.fleet.get(tenant);
    const others = view ? Math.max(0, view.fleetRunning - view.mineAtRead) : 0;
    if (others + mine >= cap) return { running: others + mine, limit: cap };
  }
  // Another tenant waits: in the queue as last read, or in this worker's
  // buffer. Once the read sees the queue without the small tenants' jobs
  // (all claimed), their buffered jobs still wait here for a slot.
  let othersWaiting = false;
  for (const [other, view] of counts.fleet) if (other !== tenant && view.waiting) othersWaiting = true;
  for (const [other, n] of counts.claimed ?? []) if (other !== tenant && n > (counts.running.get(other) ?? 0)) othersWaiting = true;
  if (!othersWaiting) return undefined;
  const share = tenantShare(tenant, counts, fairness, concurrency);
  return mine >= share ? { running: mine, limit: share } : undefined;
}

/**
 * While tenants compete (more than one with work): the tenants with work and
 * with room in this worker, and the most jobs of any one a claim takes.
 * Undefined otherwise: the plain claim.
 *
 * `prefetch` is the jobs the worker holds claimed ahead of its slots: each
 * tenant's part of them is claimed with its share, so that one claim covers
 * the time until the next. Claimed one job per tenant per claim (a share of
 * the slots alone, 1 at concurrency 5 among eleven tenants), tenants that
 * arrived behind a flood ran at the pace of the claims, with most of their
 * slots idle between them (bench/RESULTS.md, "Tenant fairness").
 */
export function tenantClaim(
  counts: TenantCounts,
  claimed: ReadonlyMap<string, number>,
  fairness: FairnessConfig,
  concurrency: number,
  prefetch = 0,
): { tenants: string[]; perTenant: number } | undefined {
  const active = competing(counts.fleet).length;
  if (active < 2) return undefined;
  const tenants: string[] = [];
  // Up to its share running and its part of the slots and the prefetch
  // waiting in the buffer, so that a finished job's slot does not wait for a claim.
  const perTenant = Math.max(1, Math.ceil((concurrency + prefetch) / active));
  for (const [tenant, view] of counts.fleet) {
    if (view.waiting && (claimed.get(tenant) ?? 0) < tenantShare(tenant, counts, fairness, concurrency) + perTenant) tenants.push(tenant);
  }
  return { tenants, perTenant };
}

/**
 * The tenant gate: a fair share of this worker's running slots per tenant,
 * and the fleet-wide caps. Only built when fairness is on; jobs without a
 * tenant pass it untouched.
 */
export class FairnessGate {
  private fleet = new Map<string, TenantView>();
  /** Per tenant, this worker's claimed-but-not-finished jobs, and the running ones among them. */
  private readonly claimedByTenant = new Map<string, number>();
  private readonly runningByTenant = new Map<string, number>();
  private readonly admitted = new Set<string>();
  private readonly claimedIds = new Set<string>();
  /** Per tenant ('' for jobs without one), when it last started a job here, counted in starts. */
  private readonly lastStart = new Map<string, number>();
  private starts = 0;

  constructor(
    private readonly fairness: FairnessConfig,
    private readonly concurrency: number,
  ) {}

  /** The tenants just read replace the last ones. */
  apply(rows: TenantRow[]): void {
    this.fleet = new Map(
      rows.map((r) => [r.tenant_id, { fleetRunning: r.running, waiting: r.waiting, mineAtRead: this.runningByTenant.get(r.tenant_id) ?? 0 }]),
    );
  }

  private get counts(): TenantCounts {
    return { fleet: this.fleet, running: this.runningByTenant, claimed: this.claimedByTenant };
  }

  /** Whether more than one tenant has work, as last read: tenantClaim() answers a claim only then. */
  competing(): boolean {
    return competing(this.fleet).length >= 2;
  }

  /** See tenantClaim(). */
  claim(prefetch = 0): { tenants: string[]; perTenant: number } | undefined {
    return tenantClaim(this.counts, this.claimedByTenant, this.fairness, this.concurrency, prefetch);
  }

  /**
   * Which buffered job to start first while tenants compete: the lowest
   * rank, that of the tenant that started a job here longest ago (a tenant's
   * own jobs keep their claim order). In claim order instead, a flood claimed
   * ahead sits first in the buffer and takes every slot it frees, a share of
   * the slots rather than an equal turn among the tenants.
   */
  startRank(job: Job): number {
    return this.lastStart.get(job.tenantId ?? '') ?? 0;
  }

  claimed(jobs: Job[]): void {
    for (const job of jobs) {
      if (job.tenantId === null) continue;
      this.claimedIds.add(job.id);
      this.claimedByTenant.set(job.tenantId, (this.claimedByTenant.get(job.tenantId) ?? 0) + 1);
    }
  }

  /** Whether the job's tenant has room under its share now: no side effects, for choosing what to start. */
  withinShare(job: Job): boolean {
    return job.tenantId === null || overShare(job.tenantId, this.counts, this.fairness, this.concurrency) === undefined;
  }

  /** Undefined to run the job; otherwise the deferral that gives it back (throttled). */
  refusal(job: Job): FailureRecord | undefined {
    if (job.tenantId === null) return undefined;
    const over = overShare(job.tenantId, this.counts, this.fairness, this.concurrency);
    if (!over) return undefined;
    return deferral('throttled', TENANT_OVER_SHARE(job.tenantId, over.running, over.limit), this.fairness.retryDelayMs);
  }

  /** The job starts: it counts against its tenant's share until it settles. */
  running(job: Job): void {
    this.lastStart.set(job.tenantId ?? '', ++this.starts);
    if (job.tenantId === null) return;
    this.admitted.add(job.id);
    this.runningByTenant.set(job.tenantId, (this.runningByTenant.get(job.tenantId) ?? 0) + 1);
  }

  /** A job left this worker's hands: finished, refused or given back. */
  settled(job: Job): void {
    if (job.tenantId === null) return;
    if (this.claimedIds.delete(job.id)) decrement(this.claimedByTenant, job.tenantId);
    // A tenant with nothing left here starts first when it comes back, as one that started longest ago.
    if (!this.claimedByTenant.has(job.tenantId)) this.lastStart.delete(job.tenantId);
    if (this.admitted.delete(job.id)) decrement(this.runningByTenant, job.tenantId);
  }
}

function decrement(counts: Map<string, number>, key: string): void {
  const n = (counts.get(key) ?? 0) - 1;
  if (n > 0) counts.set(key, n);
  else counts.delete(key);
}
