/**
 * The insights rollup's histograms of waits and runs (migration 19): fixed
 * log-scale buckets, the same for every row, so that minutes, hours, queues
 * and tasks merge by adding arrays. Bucket 0 holds under 1 ms; bucket i >= 1
 * holds [2^((i-1)/perOctave), 2^(i/perOctave)) ms; the last holds everything
 * from its lower bound up (2^27 ms, about 37 hours). The rollup is handed
 * these numbers, so this is their one home.
 */
export const INSIGHTS_HISTOGRAM = { buckets: 56, perOctave: 2 } as const;

/**
 * How far a percentile read from the histogram can be from the true one, as
 * a fraction: a bucket is reported by its geometric middle, which is within
 * 2^(1/(2 perOctave)) of any value in it (19% at two buckets an octave).
 */
export const INSIGHTS_PRECISION = 2 ** (1 / (2 * INSIGHTS_HISTOGRAM.perOctave)) - 1;

/** The bounds of bucket i in milliseconds: [low, high), high Infinity for the last. */
export function bucketBounds(i: number): [number, number] {
  const { buckets, perOctave } = INSIGHTS_HISTOGRAM;
  if (i <= 0) return [0, 1];
  return [2 ** ((i - 1) / perOctave), i >= buckets - 1 ? Infinity : 2 ** (i / perOctave)];
}

/** Adds histogram b into a, bucket by bucket (a is changed and returned). */
export function addHistogram(a: number[], b: readonly number[]): number[] {
  for (let i = 0; i < b.length; i++) a[i] = (a[i] ?? 0) + (b[i] ?? 0);
  return a;
}

/**
 * The p-quantile (0 < p <= 1) of a histogram in milliseconds, null when it is
 * empty: the geometric middle of the bucket the quantile falls in (its lower
 * bound for the last, open, bucket; 0.5 ms for under 1 ms).
 */
export function percentile(hist: readonly number[], p: number): number | null {
  const total = hist.reduce((n, c) => n + c, 0);
  if (!total) return null;
  const rank = Math.max(1, Math.ceil(p * total));
  let seen = 0;
  for (let i = 0; i < hist.length; i++) {
    seen += hist[i];
    if (seen >= rank) {
      const [low, high] = bucketBounds(i);
      if (i === 0) return 0.5;
      return high === Infinity ? low : Math.sqrt(low * high);
    }
  }
  return null;
}
