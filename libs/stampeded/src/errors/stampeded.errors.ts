/** Bad input or bad configuration: nothing was written. */
export class StampededConfigError extends Error {
  override name = 'StampededConfigError';
}

/**
 * Migrations refused to adopt a schema that holds Stampeded objects but not
 * exactly those of the seed (migration 1): nothing was written. `differences`
 * lists each one, as the message does.
 */
export class SeedMismatchError extends StampededConfigError {
  override name = 'SeedMismatchError';
  constructor(
    message: string,
    readonly differences: string[],
  ) {
    super(message);
  }
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

/**
 * The reason a handler's AbortSignal fires: the job timed out, was cancelled,
 * is no longer this worker's, or the worker is shutting down.
 */
export class JobAbortedError extends Error {
  override name = 'JobAbortedError';
}

/** The job's checkpoint could not be saved (too large, or the job is no longer ours). */
export class CheckpointError extends Error {
  override name = 'CheckpointError';
}

/**
 * A handler's return value could not be stored as the job's result (not
 * JSON, or over the size limit): the attempt fails with this error, and the
 * job is retried or discarded as its retry policy says.
 */
export class ResultError extends Error {
  override name = 'ResultError';
}

/** ctx.progress() refused its value (not a finite number or a JSON object, or over 1 KB): nothing was written. */
export class ProgressError extends Error {
  override name = 'ProgressError';
}

/**
 * Thrown by a handler whose job has a destination that said to back off (an
 * HTTP 429, or a 503 with Retry-After): the destination's breaker opens for
 * the whole fleet for `cooldownMs`, and this job -- like every job for it
 * meanwhile -- is deferred to the cooldown's end with its attempt refunded.
 */
export class BreakerOpenError extends Error {
  override name = 'BreakerOpenError';
  constructor(
    readonly cooldownMs: number,
    message = `destination asked to back off for ${cooldownMs} ms`,
  ) {
    super(message);
  }

  /** From a Retry-After header: seconds, or an HTTP date. */
  static fromRetryAfter(header: string | null | undefined, fallbackMs = 30_000, message?: string): BreakerOpenError {
    const seconds = Number(header);
    let ms = Number.isFinite(seconds) && header?.trim() ? seconds * 1000 : header ? Date.parse(header) - Date.now() : NaN;
    if (!Number.isFinite(ms) || ms <= 0) ms = fallbackMs;
    return new BreakerOpenError(Math.round(ms), message);
  }
}

/**
 * A `waitFor()` that ended without the job's outcome: it timed out, the job
 * is no longer stored (removed on completion, pruned), or the app is shutting
 * down. Only the wait ended: the job itself is not affected.
 */
export class JobWaitError extends Error {
  override name = 'JobWaitError';
  constructor(
    readonly jobId: string,
    readonly reason: 'timed_out' | 'removed' | 'shutdown',
    message: string,
  ) {
    super(message);
  }
}

/**
 * Encrypted args or a result could not be opened: the key that sealed them
 * (`keyId`) is not among this process's keys, or is not the key listed
 * under that id, or the stored envelope is not one this runtime reads.
 * docs/encryption.md.
 */
export class EncryptionError extends Error {
  override name = 'EncryptionError';
  constructor(
    message: string,
    readonly keyId?: string,
  ) {
    super(message);
  }
}
