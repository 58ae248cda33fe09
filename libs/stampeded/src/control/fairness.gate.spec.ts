import type { Job } from '../interfaces/job.interface.js';
import type { FairnessConfig } from './control.config.js';
import { FairnessGate, overShare, tenantClaim, tenantShare, type TenantCounts, type TenantView } from './fairness.gate.js';

const fairness = (over: Partial<FairnessConfig> = {}): FairnessConfig => ({
  weights: new Map(),
  maxRunning: new Map(),
  defaultMaxRunning: Infinity,
  retryDelayMs: 1000,
  ...over,
});

const view = (fleetRunning: number, waiting: boolean, mineAtRead = 0): TenantView => ({ fleetRunning, waiting, mineAtRead });

const counts = (fleet: Record<string, TenantView>, running: Record<string, number> = {}): TenantCounts => ({
  fleet: new Map(Object.entries(fleet)),
  running: new Map(Object.entries(running)),
});

const job = (id: string, tenantId: string | null) => ({ id, queue: 'q', tenantId, destination: null }) as Job;

describe('a tenant’s share of a worker’s slots', () => {
  it('is the slots over the tenants with work, at least one', () => {
    const c = counts({ a: view(0, true), b: view(3, false), c: view(0, false) });
    expect(tenantShare('a', c, fairness(), 10)).toBe(5);
    expect(tenantShare('a', counts({ a: view(0, true), b: view(0, true), c: view(0, true) }), fairness(), 2)).toBe(1);
  });

  it('counts the tenant itself and the tenants this worker runs, even when the read did not see them', () => {
    expect(tenantShare('new', counts({}, { other: 1 }), fairness(), 10)).toBe(5);
    expect(tenantShare('new', counts({}, { other: 0 }), fairness(), 10)).toBe(10);
  });

  it('follows the weights', () => {
    const c = counts({ big: view(0, true), small: view(0, true) });
    const f = fairness({ weights: new Map([['big', 3]]) });
    expect(tenantShare('big', c, f, 8)).toBe(6);
    expect(tenantShare('small', c, f, 8)).toBe(2);
  });
});

describe('whether a tenant is over its share', () => {
  it('is never while no other tenant waits, without a cap', () => {
    expect(overShare('a', counts({ a: view(50, true), b: view(2, false) }, { a: 10 }), fairness(), 10)).toBeUndefined();
  });

  it('is at its share while another tenant waits', () => {
    const c = counts({ a: view(5, true), b: view(0, true) }, { a: 5 });
    expect(overShare('a', c, fairness(), 10)).toEqual({ running: 5, limit: 5 });
    expect(overShare('a', counts({ a: view(4, true), b: view(0, true) }, { a: 4 }), fairness(), 10)).toBeUndefined();
  });

  it('counts the fleet against a cap, less what this worker ran at the read', () => {
    const f = fairness({ maxRunning: new Map([['a', 4]]) });
    // The fleet ran 5, 2 of them this worker's at the read: 3 others, plus 1 mine now.
    expect(overShare('a', counts({ a: view(5, false, 2) }, { a: 1 }), f, 10)).toEqual({ running: 4, limit: 4 });
    expect(overShare('a', counts({ a: view(5, false, 3) }, { a: 1 }), f, 10)).toBeUndefined();
    expect(overShare('b', counts({}, {}), fairness({ defaultMaxRunning: 1 }), 10)).toBeUndefined();
    expect(overShare('b', counts({}, { b: 1 }), fairness({ defaultMaxRunning: 1 }), 10)).toEqual({ running: 1, limit: 1 });
  });
});

describe('the fair claim', () => {
  it('is the plain claim unless two tenants have work', () => {
    expect(tenantClaim(counts({ a: view(3, true) }), new Map(), fairness(), 10)).toBeUndefined();
    expect(tenantClaim(counts({ a: view(3, true), b: view(0, false) }), new Map(), fairness(), 10)).toBeUndefined();
  });

  it('names the waiting tenants with fewer than twice their share claimed', () => {
    const c = counts({ a: view(0, true), b: view(0, true), c: view(4, false) });
    // 9 slots over 3 tenants with work: a share of 3, so up to 6 claimed.
    expect(
      tenantClaim(
        c,
        new Map([
          ['a', 6],
          ['b', 5],
        ]),
        fairness(),
        9,
      ),
    ).toEqual({ tenants: ['b'], perTenant: 3 });
  });
});

describe('the fair claim’s size', () => {
  it('claims each tenant’s part of the slots and the prefetch, and holds up to its share running plus that part', () => {
    const fleet: Record<string, TenantView> = { flood: view(3, true) };
    for (let i = 1; i <= 10; i++) fleet[`small-${i}`] = view(0, true);
    // Concurrency 5 and 20 claimed ahead, among eleven tenants: 3 a claim; a share of 1 running plus 3.
    const claim = tenantClaim(
      counts(fleet),
      new Map([
        ['small-1', 4],
        ['small-2', 3],
        ['flood', 30],
      ]),
      fairness(),
      5,
      20,
    )!;
    expect(claim.perTenant).toBe(3);
    expect(claim.tenants).not.toContain('small-1');
    expect(claim.tenants).toContain('small-2');
    expect(claim.tenants).not.toContain('flood');
    expect(claim.tenants).toHaveLength(9);
  });
});

describe('whether another tenant waits', () => {
  it('counts another tenant’s jobs buffered in this worker, once the read no longer sees them in the queue', () => {
    const fleet = { a: view(2, false), b: view(1, false) };
    // b's jobs were all claimed: the read sees none waiting, but one waits in this worker's buffer.
    expect(
      overShare(
        'a',
        {
          ...counts(fleet, { a: 2 }),
          claimed: new Map([
            ['a', 2],
            ['b', 1],
          ]),
        },
        fairness(),
        4,
      ),
    ).toEqual({ running: 2, limit: 2 });
    expect(
      overShare(
        'a',
        {
          ...counts(fleet, { a: 2, b: 1 }),
          claimed: new Map([
            ['a', 2],
            ['b', 1],
          ]),
        },
        fairness(),
        4,
      ),
    ).toBeUndefined();
  });
});

describe('FairnessGate', () => {
  it('starts the tenants in turns: the one that started a job here longest ago first', () => {
    const gate = new FairnessGate(fairness(), 4);
    gate.apply([
      { tenant_id: 'a', running: 0, waiting: true },
      { tenant_id: 'b', running: 0, waiting: true },
    ]);
    gate.claimed([job('1', 'a'), job('2', 'b'), job('3', 'a'), job('4', 'b'), job('5', null)]);
    gate.running(job('1', 'a'));
    gate.running(job('2', 'b'));
    expect(gate.startRank(job('3', 'a'))).toBeLessThan(gate.startRank(job('4', 'b')));
    // A tenant that has not started here yet goes first; jobs without a tenant take their turn as one more.
    expect(gate.startRank(job('5', null))).toBe(0);
    gate.running(job('3', 'a'));
    expect(gate.startRank(job('4', 'b'))).toBeLessThan(gate.startRank(job('9', 'a')));
  });

  it('gives a job back as throttled, with the retry delay and a little spread, when its tenant is at its share', () => {
    const gate = new FairnessGate(fairness({ retryDelayMs: 1000 }), 2);
    gate.apply([
      { tenant_id: 'a', running: 0, waiting: true },
      { tenant_id: 'b', running: 0, waiting: true },
    ]);
    expect(gate.refusal(job('1', 'a'))).toBeUndefined();
    gate.running(job('1', 'a'));
    expect(gate.withinShare(job('2', 'a'))).toBe(false);
    const refusal = gate.refusal(job('2', 'a'))!;
    expect(refusal.kind).toBe('throttled');
    expect(refusal.error).toMatch(/tenant "a" already has 1 job\(s\) running, its share is 1/);
    expect(refusal.retryDelayMs).toBeGreaterThanOrEqual(1000);
    expect(refusal.retryDelayMs).toBeLessThanOrEqual(1200);
    expect(gate.withinShare(job('3', 'b'))).toBe(true);
    gate.settled(job('1', 'a'));
    expect(gate.withinShare(job('2', 'a'))).toBe(true);
  });

  it('lets jobs without a tenant through, and counts claims until they settle', () => {
    const gate = new FairnessGate(fairness(), 2);
    gate.apply([
      { tenant_id: 'a', running: 0, waiting: true },
      { tenant_id: 'b', running: 0, waiting: true },
    ]);
    expect(gate.refusal(job('x', null))).toBeUndefined();
    expect(gate.withinShare(job('x', null))).toBe(true);
    gate.claimed([job('1', 'a'), job('2', 'a'), job('3', null)]);
    expect(gate.claim()).toEqual({ tenants: ['b'], perTenant: 1 });
    gate.settled(job('1', 'a'));
    expect(gate.claim()).toEqual({ tenants: ['a', 'b'], perTenant: 1 });
  });
});
