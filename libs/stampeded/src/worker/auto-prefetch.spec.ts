import { AutoPrefetch } from './auto-prefetch.js';

/** Frees a slot every `everyMs` from `from` to `to` and asks for the size each time, as the worker does; the last answer. */
function freeSlots(prefetch: AutoPrefetch, from: number, to: number, everyMs: number): number {
  let size = prefetch.size(from);
  for (let t = from + everyMs; t <= to; t += everyMs) {
    prefetch.slotFreed();
    size = prefetch.size(t);
  }
  return size;
}

describe('AutoPrefetch', () => {
  it('claims nothing ahead before any slot has freed', () => {
    const prefetch = new AutoPrefetch(1);
    expect([0, 100, 5_000, 60_000].map((t) => prefetch.size(t))).toEqual([0, 0, 0, 0]);
  });

  it('claims ahead under a backlog of short jobs: about 200 ms of work, at least concurrency', () => {
    const prefetch = new AutoPrefetch(10);
    // One slot frees a millisecond: 200 jobs in the window.
    expect(freeSlots(prefetch, 0, 1_000, 1)).toBe(200);
  });

  it('claims at most one claim statement (500) ahead, unless concurrency is larger', () => {
    expect(freeSlots(new AutoPrefetch(50), 0, 1_000, 0.05)).toBe(500);
    expect(freeSlots(new AutoPrefetch(800), 0, 1_000, 0.05)).toBe(800);
  });

  it('claims nothing ahead while slots free up slower than one per slot per window', () => {
    // Ten slots, one freeing every 100 ms: two jobs in the window, for ten slots.
    expect(freeSlots(new AutoPrefetch(10), 0, 2_000, 100)).toBe(0);
  });

  it('stops claiming ahead once a long job holds the only slot after a busy spell', () => {
    const prefetch = new AutoPrefetch(1);
    expect(freeSlots(prefetch, 0, 1_000, 1)).toBeGreaterThan(0);
    // Nothing frees; the next question comes when a job is enqueued, two seconds on.
    expect(prefetch.size(3_000)).toBe(0);
  });
});
