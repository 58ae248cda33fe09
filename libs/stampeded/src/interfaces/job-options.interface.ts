import type { EntityManager } from 'typeorm';

export type DedupPeriod = 'minute' | 'hour' | 'day' | 'week' | 'month';

/**
 * What a duplicate does to the waiting job of its scope: `keep` leaves it as
 * it is; `replace` gives it the duplicate's args and meta; `extend` also
 * moves its run time to `delayMs` after the duplicate (debounce).
 * docs/enqueue.md has the rules.
 */
export type DedupMode = 'keep' | 'replace' | 'extend';

/** At most one waiting or running job per scope (and per period, when one is given). */
export interface DedupOptions {
  scope: string;
  period?: DedupPeriod;
  /** Default `keep`. */
  mode?: DedupMode;
  /** With `extend` (and only with it, which needs it): the job runs this many milliseconds after the newest request. */
  delayMs?: number;
  /** With `extend`: the job is never pushed later than this many milliseconds after the request that inserted it. */
  maxDelayMs?: number;
}

/** The options a job carries, whoever sets them: @Task(), registerQueue(), forRoot() or enqueue(). */
export interface JobOptions {
  queue?: string;
  /** Lower runs first (the claim orders by priority ascending). smallint. */
  priority?: number;
  maxAttempts?: number;
  /** Seconds since the last touch after which a running job has timed out. */
  expireSeconds?: number;
  backoff?: { baseMs?: number; maxMs?: number };
  /** How many times the job may take its worker down with it. */
  maxInterruptions?: number;
  /** How many times the runtime may decline to run it (throttled, breaker open). */
  maxDeferrals?: number;
  /** Where a copy goes, with provenance, when the job fails terminally. */
  deadLetterQueue?: string;
  /**
   * Delete the job when it completes, instead of keeping it as `completed`
   * (BullMQ's removeOnComplete). The completion then writes a delete, not a
   * second copy of the row (docs/enqueue.md has the figures); the job can no
   * longer be read by id once done, and the dashboard's throughput chart
   * does not count it. Failed, cancelled and dead-lettered jobs are always
   * kept. Default false.
   */
  removeOnComplete?: boolean;
}

export interface EnqueueOptions extends JobOptions {
  /** Run no earlier than this instant. */
  runAt?: Date;
  /** Run no earlier than this many milliseconds from now, by the database's clock. */
  delayMs?: number;
  tenantId?: string;
  /** The downstream the job talks to (an API, a host), for circuit breakers. */
  destination?: string;
  /** This runtime's context for the job; stored under meta.nestjs. */
  meta?: Record<string, unknown>;
  /** At most one pending job per scope (and per period, when one is given); `mode` says what a duplicate does to it. */
  dedup?: DedupOptions;
  /**
   * Jobs of one queue with the same ordering key run one at a time, in
   * enqueue order (by id), across every process; jobs of other keys run
   * alongside. A retried job keeps its place unless its task sets
   * `ordering: { retryKeepsPlace: false }`. docs/ordering.md has the rules.
   */
  orderingKey?: string;
  /** Insert inside this transaction: a rollback leaves no job. */
  manager?: EntityManager;
}

export interface EnqueueResult {
  id: string;
  /**
   * True when a job with the same dedup scope existed: with mode `keep` its
   * id is returned and nothing was inserted; with `replace` or `extend` see
   * `replaced` and `runsAfter`.
   */
  deduplicated: boolean;
  /**
   * With dedup mode `replace` or `extend`, on a duplicate: true, its args and
   * meta are the ones the scope's next run takes (they replaced the waiting
   * job's, or, see `runsAfter`, went to the job that runs after the running one).
   */
  replaced?: boolean;
  /**
   * With dedup mode `replace` or `extend`, when the scope's job was claimed or
   * running: that job's id. The request waits behind it as the scope's one
   * follow-up job, whose id is `id`: 'pending' until that job finishes, then
   * due (docs/enqueue.md, "Debounce").
   */
  runsAfter?: string;
}
