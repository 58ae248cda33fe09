/**
 * The delay before a failed job's next attempt: exponential from the job's
 * backoff_base_ms (doubling per attempt), capped at backoff_max_ms, with equal
 * jitter -- half the delay fixed, half random -- so that a batch of jobs that
 * failed together (a downstream outage) does not come back together.
 */
export function retryDelayMs(attempt: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const exponent = Math.max(0, attempt - 1);
  // 2 ** 1024 is Infinity; Math.min caps it all the same.
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.min(exponent, 64));
  const half = ceiling / 2;
  return Math.round(half + random() * half);
}
