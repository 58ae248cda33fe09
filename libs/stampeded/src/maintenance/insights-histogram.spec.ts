import { INSIGHTS_HISTOGRAM, INSIGHTS_PRECISION, addHistogram, bucketBounds, percentile } from './insights-histogram.js';

/** The bucket the rollup's SQL puts a duration in, written again here to check the reading side against it. */
const bucketOf = (ms: number) =>
  ms < 1 ? 0 : Math.min(INSIGHTS_HISTOGRAM.buckets - 1, 1 + Math.floor((INSIGHTS_HISTOGRAM.perOctave * Math.log(ms)) / Math.log(2)));

describe('insights histogram', () => {
  it('puts every duration inside its bucket bounds', () => {
    for (const ms of [0, 0.4, 1, 1.3, 2, 3, 10, 99, 1000, 60_000, 3_600_000, 2 ** 27 - 1, 2 ** 27, 10 ** 12]) {
      const [low, high] = bucketBounds(bucketOf(ms));
      expect(ms).toBeGreaterThanOrEqual(low);
      expect(ms).toBeLessThan(high);
    }
  });

  it('reads percentiles within its stated precision', () => {
    const values = Array.from({ length: 1000 }, (_, i) => 5 + i * 3.7);
    const hist = new Array<number>(INSIGHTS_HISTOGRAM.buckets).fill(0);
    for (const v of values) hist[bucketOf(v)]++;
    for (const p of [0.5, 0.95, 0.99]) {
      const exact = values[Math.ceil(p * values.length) - 1];
      const read = percentile(hist, p)!;
      expect(Math.abs(read - exact) / exact).toBeLessThanOrEqual(INSIGHTS_PRECISION + 1e-9);
    }
  });

  it('merges by adding, and says nothing of an empty histogram', () => {
    expect(addHistogram([1, 2], [3, 4, 5])).toEqual([4, 6, 5]);
    expect(percentile([0, 0, 0], 0.5)).toBeNull();
    expect(percentile([3], 0.99)).toBe(0.5);
  });
});
