import { breakerAdmission, mergeBreakerRead, probeDeferralMs, successMatters, type BreakerView } from './breaker.gate.js';
import { deferral } from './deferral.js';

const open = (openUntil: number, over: Partial<BreakerView> = {}): BreakerView => ({ state: 'open', failures: 0, openUntil, reason: null, ...over });

describe('whether a destination’s job runs', () => {
  it('runs with no breaker or a closed one', () => {
    expect(breakerAdmission(undefined, 1000)).toEqual({ action: 'run' });
    expect(breakerAdmission({ state: 'closed', failures: 3, openUntil: 0, reason: null }, 1000)).toEqual({ action: 'run' });
  });

  it('waits out an open breaker’s cooldown', () => {
    expect(breakerAdmission(open(1500), 1000)).toEqual({ action: 'defer', waitMs: 500 });
  });

  it('asks for the probe once the cooldown is over, or while half open', () => {
    expect(breakerAdmission(open(1000), 1000)).toEqual({ action: 'probe' });
    expect(breakerAdmission(open(5000, { state: 'half_open' }), 1000)).toEqual({ action: 'probe' });
  });
});

describe('how long a job waits when another job probes', () => {
  it('waits to the end of a reopened breaker’s cooldown', () => {
    expect(probeDeferralMs('open', 20_000, 30_000)).toBe(20_000);
  });

  it('waits at most a quarter of the cooldown while another job probes, and never less than 250 ms', () => {
    expect(probeDeferralMs('half_open', 20_000, 30_000)).toBe(7500);
    expect(probeDeferralMs('half_open', 20_000, 400)).toBe(250);
    expect(probeDeferralMs('half_open', 100, 30_000)).toBe(250);
    expect(probeDeferralMs('open', 0, 30_000)).toBe(250);
  });
});

describe('a read of the breakers', () => {
  it('replaces what this worker knew, except what it changed while the read was under way', () => {
    const read = new Map<string, BreakerView>([
      ['stale', { state: 'closed', failures: 1, openUntil: 0, reason: null }],
      ['other', open(10)],
    ]);
    const local = new Map<string, BreakerView>([
      ['stale', open(99, { reason: 'tripped here' })],
      ['before', open(5)],
    ]);
    // 'stale' changed after the read began (3 > 2), 'before' before it, 'closed-here' after it and is now closed.
    const changes = new Map([
      ['stale', 3],
      ['before', 1],
      ['closed-here', 4],
    ]);
    read.set('closed-here', open(50));
    const merged = mergeBreakerRead(read, local, changes, 2);
    expect(merged.get('stale')?.reason).toBe('tripped here');
    expect(merged.has('before')).toBe(false);
    expect(merged.has('closed-here')).toBe(false);
    expect(merged.get('other')).toEqual(open(10));
  });
});

describe('whether a success is worth a statement', () => {
  it('is for a probe, and for a destination with a breaker not plainly closed', () => {
    expect(successMatters(true, undefined)).toBe(true);
    expect(successMatters(false, undefined)).toBe(false);
    expect(successMatters(false, { state: 'closed', failures: 0, openUntil: 0, reason: null })).toBe(false);
    expect(successMatters(false, { state: 'closed', failures: 2, openUntil: 0, reason: null })).toBe(true);
    expect(successMatters(false, open(0, { state: 'half_open' }))).toBe(true);
  });
});

describe('a deferral', () => {
  it('spreads the delay by up to a fifth, so a fleet’s deferred jobs do not come due together', () => {
    expect(deferral('breaker_open', 'e', 1000, () => 0)).toEqual({ kind: 'breaker_open', error: 'e', retryDelayMs: 1000 });
    expect(deferral('throttled', 'e', 1000, () => 0.999).retryDelayMs).toBe(1200);
  });
});
