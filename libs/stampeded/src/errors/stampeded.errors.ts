/** Bad input or bad configuration: nothing was written. */
export class StampededConfigError extends Error {
  override name = 'StampededConfigError';
}

/** An enqueue, cancel or retry refused before anything was written. */
export class InvalidJobError extends StampededConfigError {
  override name = 'InvalidJobError';
}

/**
 * Thrown by a handler: the job is discarded at once (failure kind
 * `unrecoverable`) and dead-lettered, whatever attempts it has left.
 */
export class UnrecoverableError extends Error {
  override name = 'UnrecoverableError';
}

/** Thrown by a handler: retry after exactly this delay instead of the backoff. */
export class RetryAfterError extends Error {
  override name = 'RetryAfterError';
  constructor(
    readonly delayMs: number,
    message = `retry requested in ${delayMs} ms`,
  ) {
    super(message);
  }
}

/** The job's checkpoint could not be saved (too large, or the job is no longer ours). */
export class CheckpointError extends Error {
  override name = 'CheckpointError';
}
