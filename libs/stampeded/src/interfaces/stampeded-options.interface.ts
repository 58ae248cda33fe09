import type { ModuleMetadata, Type } from '@nestjs/common';
import type { PoolConfig } from 'pg';
import type { DataSource } from 'typeorm';
import type { JobOptions } from './job-options.interface.js';
import type { MaintenanceOptions } from './maintenance.interface.js';
import type { SchedulesOptions } from './schedule.interface.js';
import type { StampededClock } from './clock.interface.js';
import type { ControlOptions, QueuePolicy } from './control.interface.js';
import type { TracingOptions } from './tracing.interface.js';
import type { EncryptionOptions } from './encryption.interface.js';

export interface WorkerOptions {
  /** Run jobs in this process. `false` for API-only processes: they still enqueue. Default true. */
  enabled?: boolean;
  /** Handlers running at once in this process. Default 10. */
  concurrency?: number;
  /** Queues to claim from. Default: every queue that a discovered task or registerQueue() names. */
  queues?: string[];
  /**
   * Poll for due jobs this often, for future runAt and lost notifications.
   * Default 1000 ms; 500 ms behind a transaction-mode pooler with no
   * `listenConnection`, where the poll is the only wake-up.
   */
  pollIntervalMs?: number;
  /** On shutdown, how long running handlers may finish before they are aborted. Default 10000 ms. */
  shutdownTimeoutMs?: number;
  /** How often the worker row's heartbeat is written. Default 5000 ms. */
  heartbeatIntervalMs?: number;
  /**
   * Jobs claimed ahead of free slots, so that a finished handler starts the
   * next job without waiting for a round trip. Buffered jobs start in the
   * claim's order (lower priority, then earlier scheduled_at).
   *
   * Default `'auto'`: about 200 ms of work at the rate this worker's slots
   * free up, at least `concurrency` and at most 500; and nothing while they
   * free up slower than one per slot per 200 ms (long jobs, or few), so that
   * the job that starts when a slot frees is the best one due then. While it
   * claims ahead, a better job enqueued after the buffer filled waits behind
   * the buffered ones (about 200 ms of work).
   *
   * A number claims that many ahead at any speed: up to that many jobs may
   * start before better ones enqueued after them, and their expiry clocks run
   * from the claim while they wait.
   */
  prefetch?: number | 'auto';
  /** Most jobs one claim statement takes. Default 500. */
  claimBatchSize?: number;
  /** Most outcomes one completion statement records. Default 500. */
  completionBatchSize?: number;
  /** Free-form metadata stored on the worker's row. */
  metadata?: Record<string, unknown>;
}

export interface ConnectionOptions extends PoolConfig {
  /** A postgres:// connection string. */
  url?: string;
}

/**
 * How Stampeded's connections reach the database when they go through a
 * pooler in transaction mode (PgBouncer's `pool_mode = transaction`, or a
 * cloud pooler of that kind), where a connection is one session only for the
 * length of a transaction. See docs/poolers.md.
 */
export interface PoolerOptions {
  mode: 'transaction';
  /**
   * Whether the pooler keeps protocol-level prepared statements across
   * transactions (PgBouncer 1.21 and later with `max_prepared_statements`
   * above 0). Default false: every statement goes unnamed, parsed each time.
   */
  preparedStatements?: boolean;
}

export interface StampededModuleOptions {
  /**
   * The instance's name, for an app that runs Stampeded on several databases:
   * its services are injected with @InjectQueueService(name) and the like, and
   * its tasks say `@Task('x', { instance: name })`. Default: the default
   * instance, whose services are injected by their classes.
   */
  name?: string;
  /** The Postgres schema Stampeded's tables live in. Default: `public`. */
  schema?: string;
  /** Name of the app's TypeORM DataSource to use. Default: the default DataSource. */
  dataSource?: string;
  /** A connection of Stampeded's own, instead of the app's DataSource. */
  connection?: ConnectionOptions;
  /**
   * `'transaction'` when the connection (the app's DataSource's, or
   * `connection`) goes through a transaction-mode pooler such as PgBouncer:
   * then nothing relies on a session outliving a transaction. The maintenance
   * leader holds a lease row instead of a session lock, statements go
   * unnamed, and LISTEN happens only on `listenConnection` (without one, the
   * worker, waitFor() and cancels poll). Not detected: a pooler is invisible
   * to the client. Default: none (a direct connection, or a session-mode
   * pooler). See docs/poolers.md.
   */
  pooler?: 'transaction' | PoolerOptions;
  /**
   * With `pooler: 'transaction'`: a direct connection to the same database,
   * not through the pooler, used only to LISTEN (one connection per app).
   * With it, wake-ups, cancels and `events: 'fleet'` work as without a pooler.
   */
  listenConnection?: ConnectionOptions;
  /**
   * A streaming standby (a read replica) of the database, for the reads that
   * may lag: the dashboard's lists, counts and charts, the metrics scrape and
   * `getJob(id, { replica: true })`. The name of the app's TypeORM DataSource
   * that connects to it, that DataSource itself, or connection options
   * (`{ url }`). Enqueues, claims, outcomes, the dashboard's actions and the
   * default getJob() stay on the primary. While the replica does not answer,
   * those reads go to the primary, and the dashboard says so. Default: none,
   * every read on the primary. See docs/dashboard.md (Reads from a replica).
   */
  readConnection?: string | DataSource | ConnectionOptions;
  /** `'auto'` runs pending migrations at startup. Default: none (run them yourself). */
  migrations?: 'auto' | 'none';
  /** Size of Stampeded's own connection pool. Default 10. */
  poolSize?: number;
  worker?: WorkerOptions;
  /** Defaults for every job this app enqueues; a task's and an enqueue's options win. */
  defaultJobOptions?: JobOptions;
  /** The maintenance leader: reaping, expiry, pruning and retention, partition repair, health, reindexing. */
  maintenance?: MaintenanceOptions;
  /** Firing of cron and interval schedules. */
  schedules?: SchedulesOptions;
  /** Where the scheduler reads the time. Default: the database's clock. Tests pass a TestClock. */
  clock?: StampededClock;
  /** Queue control: the planner, fair shares per tenant, circuit breakers per destination. See docs/queue-control.md. */
  control?: ControlOptions;
  /**
   * Which job events `events$` and `@OnJobEvent` receive. `'fleet'` (the
   * default): those of every process of the fleet (same schema), heard
   * through LISTEN/NOTIFY, and this app's workers send theirs; `'local'`:
   * only those of the jobs this app's own workers run, and its workers send
   * nothing. Give every process of a fleet the same setting: a process hears
   * only the workers that send. See docs/tasks.md (Events).
   */
  events?: 'fleet' | 'local';
  /**
   * OpenTelemetry spans for enqueues and executions. Default: on when
   * @opentelemetry/api is installed, off otherwise; `false` turns them off;
   * `true` or an object asks for them, and a missing package fails the startup.
   */
  tracing?: boolean | TracingOptions;
  /**
   * The keys that encrypt the args (and stored results) of the tasks and
   * queues that say `encrypt: true`, AES-256-GCM in this process:
   * `{ keys: { k2: <32 bytes, base64 or a Buffer>, k1: ... }, current: 'k2' }`.
   * Every process that enqueues or runs such jobs needs them. See
   * docs/encryption.md.
   */
  encryption?: EncryptionOptions;
}

export interface StampededModuleAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  useFactory?: (...args: any[]) => StampededModuleOptions | Promise<StampededModuleOptions>;
  inject?: any[];
  useClass?: Type<StampededOptionsFactory>;
  useExisting?: Type<StampededOptionsFactory>;
}

export interface StampededOptionsFactory {
  createStampededOptions(): StampededModuleOptions | Promise<StampededModuleOptions>;
}

export interface RegisterQueueOptions {
  name: string;
  /** An UNLOGGED partition: fast, and emptied by a crash. See docs/performance.md (UNLOGGED queues) before using it. */
  unlogged?: boolean;
  /** Handlers of this queue running at once in this process. Default: the worker's concurrency. */
  concurrency?: number;
  /** Defaults for every job enqueued on this queue. */
  defaultJobOptions?: JobOptions;
  /** Fleet-wide policy (max_running, max_wait_secs), written at bootstrap; QueueControlService.setPolicy() changes it at run time. */
  policy?: QueuePolicy;
  /**
   * Store the args (and results) of every job on this queue encrypted, as a
   * task's `encrypt: true` does, whatever its task. Needs forRoot's
   * `encryption` keys in every process that enqueues to it or runs it.
   */
  encrypt?: boolean;
  /** The instance (forRoot's `name`) whose database holds this queue. Default: the default instance. */
  instance?: string;
}
