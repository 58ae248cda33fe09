export type JobState = 'pending' | 'available' | 'claimed' | 'executing' | 'retryable' | 'completed' | 'discarded' | 'cancelled';

export type FailureKind =
  'raised' | 'timed_out' | 'heartbeat_lost' | 'worker_exited' | 'worker_missing' | 'breaker_open' | 'throttled' | 'cancelled' | 'unrecoverable';

export const JOB_STATES: readonly JobState[] = ['pending', 'available', 'claimed', 'executing', 'retryable', 'completed', 'discarded', 'cancelled'];

/** The states a job does not leave by itself: a wait ends there, and a cancel does nothing. A retryable job is not finished. */
export const FINISHED_STATES: ReadonlySet<JobState> = new Set<JobState>(['completed', 'discarded', 'cancelled']);

/**
 * The states of a job enqueued and not yet taken by a worker: waiting for
 * its turn or its dependencies (pending), due or scheduled (available), or
 * waiting to retry (retryable).
 */
export const WAITING_STATES: ReadonlySet<JobState> = new Set<JobState>(['pending', 'available', 'retryable']);

export interface JobErrorEntry {
  at: string;
  attempt: number;
  kind: FailureKind;
  message: string;
  destination: string | null;
  exit_status: number | null;
  /** When the attempt started (its claim); absent from entries an older version of the functions recorded. */
  started_at?: string | null;
  /** The worker that ran the attempt; absent likewise. */
  worker?: string | null;
}

/**
 * What a running handler reports through `ctx.progress()`: a number (a
 * percentage, by convention) or a small JSON object (`{ done: 40, total: 200 }`).
 */
export type JobProgress = number | Record<string, unknown>;

/** A line a running handler wrote with `ctx.log()`. */
export interface JobLogLine {
  /** When the handler wrote it, by the clock of the process that ran it. */
  at: Date;
  /** The attempt that wrote it. */
  attempt: number;
  message: string;
}

/**
 * A job's log, over all its attempts: its newest lines, oldest first, and
 * how many older ones were dropped to keep within its task's
 * `logs.maxLines`.
 */
export interface JobLogs {
  lines: JobLogLine[];
  dropped: number;
}

/**
 * A row of stampeded_jobs, as the runtime hands it out. Read through a typed
 * call (`getJob(SendEmail, id)`), `Args` and `Result` are its task's
 * (ArgsOf, ResultOf).
 */
export interface Job<Args extends object = Record<string, unknown>, Result = unknown> {
  id: string;
  queue: string;
  tenantId: string | null;
  task: string;
  args: Args;
  meta: Record<string, unknown>;
  state: JobState;
  priority: number;
  destination: string | null;
  /** The ordering key it runs under, one at a time (the orderingKey enqueue option), or null. */
  orderingKey: string | null;
  scheduledAt: Date;
  expireSeconds: number;
  heartbeatAt: Date | null;
  attempt: number;
  maxAttempts: number;
  attemptedBy: string[];
  interruptions: number;
  maxInterruptions: number;
  deferrals: number;
  maxDeferrals: number;
  checkpoint: unknown;
  checkpointAt: Date | null;
  checkpointSeq: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  claimedBy: string | null;
  claimedAt: Date | null;
  dedupScope: string | null;
  dedupPeriod: string | null;
  failureKind: FailureKind | null;
  lastError: string | null;
  errors: JobErrorEntry[];
  deadLetterQueue: string | null;
  sourceId: string | null;
  sourceQueue: string | null;
  sourceAttempts: number | null;
  insertedAt: Date;
  finishedAt: Date | null;
  /**
   * What the handler returned, once the job completed: null before, when it
   * returned nothing (undefined or null), and when its task has
   * `storeResult: false`.
   */
  result: Result | null;
  /**
   * The last progress its handler reported (`ctx.progress()`), kept after the
   * run ends; null when none was reported.
   */
  progress: JobProgress | null;
  /** The lines its handler wrote with `ctx.log()`: only when asked for, `getJob(id, { logs: true })`. */
  logs?: JobLogs;
}

export type QueueCounts = Record<JobState, number>;
