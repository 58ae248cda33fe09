import { retryDelayMs } from './backoff.js';

describe('retryDelayMs', () => {
  it('doubles from the base per attempt', () => {
    const top = () => 1; // the random half at its largest: the full ceiling
    expect([1, 2, 3, 4].map((a) => retryDelayMs(a, 1000, 3_600_000, top))).toEqual([1000, 2000, 4000, 8000]);
  });

  it('is capped at the maximum, however many attempts', () => {
    expect(retryDelayMs(30, 1000, 60_000, () => 1)).toBe(60_000);
    expect(retryDelayMs(32767, 1000, 60_000, () => 1)).toBe(60_000);
  });

  it('jitters within the upper half of the ceiling', () => {
    expect(retryDelayMs(3, 1000, 3_600_000, () => 0)).toBe(2000);
    for (let i = 0; i < 200; i++) {
      const d = retryDelayMs(3, 1000, 3_600_000);
      expect(d).toBeGreaterThanOrEqual(2000);
      expect(d).toBeLessThanOrEqual(4000);
    }
  });

  it('treats attempt 0 as the first', () => {
    expect(retryDelayMs(0, 500, 10_000, () => 1)).toBe(500);
  });
});
