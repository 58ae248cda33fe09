/** Injection token of the module's resolved options. */
export const STAMPEDED_OPTIONS = Symbol('STAMPEDED_OPTIONS');
/** Metadata key that @Task() writes on a provider class. */
export const TASK_METADATA = 'stampeded:task';
/** Metadata key that @OnJobEvent() writes on a method. */
export const ON_JOB_EVENT_METADATA = 'stampeded:on-job-event';
/** The name of the instance forRoot() declares without a name, whose tokens are the service classes themselves. */
export const DEFAULT_INSTANCE = 'default';
/** The instance a name means: undefined and 'default' are the default instance. */
export const instanceNameOf = (name?: string): string => name ?? DEFAULT_INSTANCE;
/** The token of an instance's handle (StampededInstance), for the sibling packages: a string for every instance, the default's too. */
export const instanceHandleToken = (instance?: string): string => `Stampeded:${instanceNameOf(instance)}:instance`;
/** The queue a job goes to when neither its task nor its enqueue names one. */
export const DEFAULT_QUEUE = 'default';
/** Whether an app hears other processes' job events, and its workers send theirs, when its options do not say. */
export const DEFAULT_EVENTS: 'fleet' | 'local' = 'fleet';

/** How often a worker looks for due jobs when LISTEN wakes it too: for future runAt and missed notifications. */
export const DEFAULT_POLL_INTERVAL_MS = 1000;

/**
 * How often a worker that cannot LISTEN (a transaction-mode pooler and no
 * direct connection) looks for due jobs and for cancels of the jobs it
 * holds: the most a new job waits for an idle worker. docs/poolers.md gives
 * what it costs.
 */
export const POLL_ONLY_INTERVAL_MS = 500;
/** The key of `meta` that this runtime owns; other runtimes' keys are never written. */
export const RUNTIME_META_KEY = 'nestjs';

/** Injection token of the job columns' defaults, read from the installed schema at startup (JobColumnDefaults). */
export const JOB_COLUMN_DEFAULTS = Symbol('JOB_COLUMN_DEFAULTS');

/** Limits the schema enforces, checked before anything is written. */
export const LIMITS = {
  smallint: { min: -32768, max: 32767 },
  integer: { min: -2147483648, max: 2147483647 },
  argsBytes: 1_048_576,
  metaBytes: 1_048_576,
  checkpointBytes: 65_536,
  /**
   * A handler's stored result, as JSON text. The completion statement carries
   * the result of every job of its batch (up to 500), so this bounds what one
   * statement sends and PostgreSQL parses; and the row stays in the jobs table,
   * the one that has the bloat problem, until it is pruned. The checkpoint's
   * bound, so that there is one number to remember.
   */
  resultBytes: 65_536,
  /**
   * A job's progress, as JSON text: counts and a stage, written again on
   * every report (at most once a second), so it stays small enough to be
   * stored inline with the row rather than TOASTed.
   */
  progressBytes: 1024,
  /** A line of a job's log, in bytes of UTF-8: the most a task's logs.maxLineBytes can be (migration 16 checks it). */
  logLineBytes: 65_536,
  /**
   * The most lines a task's logs.maxLines can keep per job: one write can
   * carry them all (a handler that logs faster than the worker writes), and
   * the job page shows them all.
   */
  logLines: 10_000,
  /** 63-byte identifiers, less the `stampeded_jobs_` prefix of a queue's partition. */
  queueNameLength: 48,
  jsonDepth: 64,
  dedupScopeBytes: 8192,
  /**
   * An ordering key, in UTF-16 code units as JavaScript counts a string
   * (1,500 bytes of UTF-8 at most): it is an entry of two btree indexes,
   * whose entries cannot pass about 2,700 bytes.
   */
  orderingKeyLength: 500,
} as const;

/**
 * What is kept of a job's ctx.log() lines when its task's logs option does
 * not say: the newest 100, each cut to 2 KB, as a job page shows them whole
 * and BullMQ users bound theirs with keepLogs.
 */
export const DEFAULT_LOG_LIMITS = { maxLines: 100, maxLineBytes: 2048 } as const;
/** The smallest logs.maxLineBytes: room for the note that says a line was cut. */
export const MIN_LOG_LINE_BYTES = 64;

/** PostgreSQL 14: the oldest whose SQL every form of the schema is written in. */
export const REQUIRED_SERVER_VERSION_NUM = 140000;
