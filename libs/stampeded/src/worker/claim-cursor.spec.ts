import { ClaimCursor } from './claim-cursor.js';

describe('ClaimCursor', () => {
  const full = (over: Partial<Parameters<ClaimCursor['record']>[0]> = {}) => ({
    after: null,
    limit: 100,
    taken: 3,
    latestDue: 50_000,
    tookMs: 1,
    at: 0,
    ...over,
  });

  it('keeps every claim a full claim while full claims are fast', () => {
    const cursor = new ClaimCursor();
    expect(cursor.next(0)).toBeNull();
    cursor.record(full({ at: 0 }));
    expect(cursor.next(10)).toBeNull();
  });

  it('starts from the latest due time claimed, less a margin, once a full claim that emptied the queue was slow', () => {
    const cursor = new ClaimCursor();
    cursor.record(full({ tookMs: 40, at: 0 }));
    expect(cursor.next(10)).toBe(50_000 - 200);
    // A claim from the cursor that emptied the queue moves it on, never back.
    cursor.record(full({ after: 49_800, latestDue: 60_000, at: 20 }));
    expect(cursor.next(30)).toBe(59_800);
    cursor.record(full({ after: 59_800, latestDue: 55_000, at: 40 }));
    expect(cursor.next(50)).toBe(59_800);
    // One that filled its limit did not see everything before its latest job: the cursor stays.
    cursor.record(full({ after: 59_800, taken: 100, latestDue: 70_000, at: 60 }));
    expect(cursor.next(70)).toBe(59_800);
  });

  it('sets no cursor from a slow full claim that did not reach the end of what was due', () => {
    const cursor = new ClaimCursor();
    cursor.record(full({ tookMs: 40, taken: 100, latestDue: 90_000 }));
    expect(cursor.next(10)).toBeNull();
    cursor.record(full({ tookMs: 40, taken: 0, latestDue: null }));
    expect(cursor.next(10)).toBeNull();
  });

  it('makes a full claim at least once a second, and drops the cursor when that one is fast', () => {
    const cursor = new ClaimCursor();
    cursor.record(full({ tookMs: 40, at: 0 }));
    expect(cursor.next(999)).toBe(49_800);
    expect(cursor.next(1000)).toBeNull();
    // Still slow: the cursor stays, and full claims resume a second later.
    cursor.record(full({ tookMs: 40, latestDue: 51_000, at: 1000 }));
    expect(cursor.next(1500)).toBe(50_800);
    expect(cursor.next(2000)).toBeNull();
    cursor.record(full({ tookMs: 2, at: 2000 }));
    expect(cursor.next(2100)).toBeNull();
  });

  it('does not count a large claim as slow for the jobs it took', () => {
    const cursor = new ClaimCursor();
    cursor.record(full({ limit: 500, taken: 400, tookMs: 25 }));
    expect(cursor.next(10)).toBeNull();
  });

  it('spaces full claims out to ten times their duration once they take longer than 100 ms', () => {
    const cursor = new ClaimCursor();
    cursor.record(full({ tookMs: 40, at: 0 }));
    expect(cursor.fullDue(999)).toBe(false);
    expect(cursor.fullDue(1000)).toBe(true);
    // A full claim that walked 400 ms of dead entries: the next is due 4 s after it came back.
    cursor.record(full({ tookMs: 400, latestDue: 51_000, at: 1400 }));
    expect(cursor.next(5399)).toBe(50_800);
    expect(cursor.fullDue(5399)).toBe(false);
    expect(cursor.fullDue(5400)).toBe(true);
    expect(cursor.next(5400)).toBeNull();
  });

  it('has no full claim due outside cursor mode, and none while one is under way', () => {
    const cursor = new ClaimCursor();
    expect(cursor.fullDue(5000)).toBe(false);
    expect(cursor.current()).toBeNull();
    cursor.record(full({ tookMs: 40, at: 0 }));
    expect(cursor.current()).toBe(49_800);
    expect(cursor.fullDue(1000)).toBe(true);
    cursor.fullStarted(1000);
    expect(cursor.fullDue(1500)).toBe(false);
    expect(cursor.next(1500)).toBe(49_800);
  });
});
