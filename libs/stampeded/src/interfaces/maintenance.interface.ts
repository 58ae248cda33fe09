import type { VacuumStanding } from '../maintenance/vacuum-watch.js';

/** A duration: milliseconds, or a string such as '90s', '15m', '1h', '7d'. */
export type Duration = number | string;

export interface MaintenanceOptions {
  /**
   * Take part in the election of the maintenance leader. `false` for
   * API-only processes: they never reap, prune or repair. Default true.
   */
  enabled?: boolean;
  /** How often a follower tries to become leader, and the leader checks its connection. Default 5000 ms. */
  leaderCheckIntervalMs?: Duration;
  /** How often the leader gives back the jobs of dead workers. Default 30 s. */
  reapIntervalMs?: Duration;
  /** How long a worker may be silent before it is dead. Default 60 s; at least three worker heartbeats. */
  reapDeadAfter?: Duration;
  /** How often the leader fails jobs that ran past expire_seconds without a touch. Default 30 s. */
  expireIntervalMs?: Duration;
  /** Jobs expired per statement. Default 100. */
  expireBatchSize?: number;
  /**
   * How often the leader releases a keyed job left waiting with nothing
   * ahead of it (an enqueue that raced the outcome of the job ahead; see
   * docs/ordering.md). Default 5 s: the longest such a job waits.
   */
  orderingSweepIntervalMs?: Duration;
  /** How often the leader prunes finished jobs. Default 60 s. */
  pruneIntervalMs?: Duration;
  /** How long completed jobs are kept. Default '1h'. */
  completedRetention?: Duration;
  /** How long discarded and cancelled jobs are kept. Default '7d'. */
  failedRetention?: Duration;
  /** How long the schedules' occurrence ledger is kept. Default '30d'. */
  occurrenceRetention?: Duration;
  /** Jobs deleted per statement. Default 10,000. */
  pruneBatchSize?: number;
  /** Most time one prune tick may take; the rest of a backlog waits for the next. Default 5000 ms. */
  pruneMaxDurationMs?: Duration;
  /** How often partitions are checked for missing triggers (and repaired). Default 5 min. */
  partitionCheckIntervalMs?: Duration;
  /** How often the leader takes a health snapshot. Default 5 min. */
  healthIntervalMs?: Duration;
  /** Rebuild sparse indexes with REINDEX CONCURRENTLY. Default false: it is the operator's call. */
  reindex?: boolean | { intervalMs?: Duration };
  /**
   * The insights rollup behind the dashboard's charts: the leader adds each
   * finished job to a row per minute and per hour (docs/maintenance.md,
   * "Insights"). Default true; false stops it, and the pruner then no longer
   * waits for it.
   */
  insights?:
    | boolean
    | {
        /** How often the leader rolls up the jobs finished since its last run. Default 15 s. */
        intervalMs?: Duration;
        /** How long ago a job must have finished to be read: longer than any transaction that finishes jobs stays open. Default '30s'. */
        settle?: Duration;
        /** Finished jobs read per statement. Default 10,000. */
        batchSize?: number;
        /** How long the minute rows (the last-hour chart) are kept. Default '2d'. */
        minuteRetention?: Duration;
        /** How long the hour rows and the busiest tenants and destinations are kept. Default '30d'. */
        hourRetention?: Duration;
      };
}

export interface VacuumHealth {
  relname: string;
  liveTuples: number;
  deadTuples: number;
  deadRatio: number;
  autovacThreshold: number;
  needsVacuum: boolean;
  lastAutovacuum: Date | null;
  /** The last vacuum by hand (VACUUM), or null. */
  lastVacuum: Date | null;
  /** Whether autovacuum visits this table: on for the server and for the table. */
  autovacuumEnabled: boolean;
  /**
   * clean, due (autovacuum's next round vacuums it: nothing is wrong),
   * overdue (due for three of autovacuum's rounds and not vacuumed) or off
   * (due, and autovacuum never visits it). Only overdue and off are warnings.
   */
  standing: VacuumStanding;
  /** Since when this process has seen it due, or null. */
  dueSince: Date | null;
}

export interface IndexDensity {
  indexName: string;
  pages: number;
  entries: number;
  perPage: number;
  sparse: boolean;
}

export interface PartitionHealth {
  partition: string;
  queue: string;
  hasNotify: boolean;
  hasCounts: boolean;
}

/** A structured health report: what the leader logs and the dashboard shows. */
export interface MaintenanceHealth {
  at: Date;
  /** Whether this process is the maintenance leader. */
  leader: boolean;
  vacuum: VacuumHealth[];
  /** Tables whose dead tuples are past autovacuum's own threshold: due for autovacuum's next round, which is no fault by itself. */
  needsVacuum: string[];
  /** Tables autovacuum is not reaching: overdue, or off for them. */
  vacuumBehind: string[];
  indexes: IndexDensity[];
  /** Indexes of 128 pages or more holding fewer than 5 entries a page. */
  sparseIndexes: string[];
  partitions: PartitionHealth[];
  /** Partitions missing their notify or counter triggers. */
  brokenPartitions: string[];
}

export type MaintenanceTaskName = 'reaper' | 'expirer' | 'ordering' | 'pruner' | 'partitions' | 'health' | 'reindexer' | 'planner' | 'insights';

/** What the maintenance service raises: tests and dashboards wait on these rather than on time. */
export type MaintenanceEvent =
  | { type: 'elected' }
  | { type: 'deposed'; reason: string }
  | { type: 'ran'; task: MaintenanceTaskName; result: Record<string, unknown>; durationMs: number }
  | { type: 'failed'; task: MaintenanceTaskName; error: string };
