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
  let othersWaiting = false;
  for (const [other, view] of counts.fleet) if (other !== tenant && view.waiting) othersWaiting = true;
  if (!othersWaiting) return undefined;
  const share = tenantShare(tenant, counts, fairness, concurrency);
  return mine >= share ? { running: mine, limit: share } : undefined;
}

/**
 * While tenants compete (more than one with work): the tenants with work and
 * with room in this worker, and the most jobs of any one a claim takes.
 * Undefined otherwise: the plain claim.
 */
export function tenantClaim(
  counts: TenantCounts,
  claimed: ReadonlyMap<string, number>,
  fairness: FairnessConfig,
  concurrency: number,
): { tenants: string[]; perTenant: number } | undefined {
  const active = competing(counts.fleet).length;
  if (active < 2) return undefined;
  const tenants: string[] = [];
  // Up to twice the share claimed: one share running, one waiting in the
  // buffer, so that a finished job's slot does not wait for a claim.
  for (const [tenant, view] of counts.fleet) {
    if (view.waiting && (claimed.get(tenant) ?? 0) < 2 * tenantShare(tenant, counts, fairness, concurrency)) tenants.push(tenant);
  }
  return { tenants, perTenant: Math.max(1, Math.floor(concurrency / active)) };
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
    return { fleet: this.fleet, running: this.runningByTenant };
  }

  /** See tenantClaim(). */
  claim(): { tenants: string[]; perTenant: number } | undefined {
    return tenantClaim(this.counts, this.claimedByTenant, this.fairness, this.concurrency);
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
    if (job.tenantId === null) return;
    this.admitted.add(job.id);
    this.runningByTenant.set(job.tenantId, (this.runningByTenant.get(job.tenantId) ?? 0) + 1);
  }

  /** A job left this worker's hands: finished, refused or given back. */
  settled(job: Job): void {
    if (job.tenantId === null) return;
    if (this.claimedIds.delete(job.id)) decrement(this.claimedByTenant, job.tenantId);
    if (this.admitted.delete(job.id)) decrement(this.runningByTenant, job.tenantId);
  }
}

function decrement(counts: Map<string, number>, key: string): void {
  const n = (counts.get(key) ?? 0) - 1;
  if (n > 0) counts.set(key, n);
  else counts.delete(key);
}
