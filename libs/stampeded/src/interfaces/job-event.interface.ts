import type { FailureKind, Job, JobProgress } from './job.interface.js';

export type JobEventType =
  /** A handler started. */
  | 'active'
  /** The handler returned and the completion was recorded. */
  | 'completed'
  /** The handler failed and the failure was recorded; `retrying` or `discarded` follows. */
  | 'failed'
  /** The job will run again after `retryDelayMs`. */
  | 'retrying'
  /** The job failed terminally; `deadLettered` says whether a copy went to its dead-letter queue. */
  | 'discarded'
  /** The job was cancelled while this worker ran it. */
  | 'cancelled'
  /** This worker no longer owned the job when it tried to record an outcome: nothing was recorded. */
  | 'lost'
  /** The job was given back unstarted or interrupted (shutdown): it runs again without losing an attempt. */
  | 'released'
  /** A running handler's progress was written (at most once a second per job): `progress` holds it. */
  | 'progress';

/** What every job event says, whichever process ran the job. */
interface JobEventFields {
  type: JobEventType;
  jobId: string;
  queue: string;
  task: string;
  /** The attempt the event is about. */
  attempt: number;
  /** The worker that ran the attempt; for `cancelled`, the one that held the job, null when none did. */
  workerId: string | null;
  failureKind?: FailureKind;
  retryDelayMs?: number;
  deadLettered?: boolean;
}

/** An event of a job that a worker of this process ran: the job as it was claimed, and what only that worker knows. */
export interface LocalJobEvent extends JobEventFields {
  origin: 'local';
  job: Job;
  workerId: string;
  error?: string;
  durationMs?: number;
  /** The handler's return value, as it returned it (`completed`). */
  result?: unknown;
  /** The progress written (`progress`). */
  progress?: JobProgress;
}

/**
 * An event of a job that another process of the fleet ran (`events: 'fleet'`):
 * what its notification holds. The job itself, its error and its result are
 * read on demand: `queue.getJob(event.jobId)`.
 */
export interface FleetJobEvent extends JobEventFields {
  origin: 'fleet';
  type: 'completed' | 'failed' | 'retrying' | 'discarded' | 'cancelled' | 'progress';
  job?: undefined;
  error?: undefined;
  durationMs?: undefined;
  result?: undefined;
  /** The progress written (`progress`). */
  progress?: JobProgress;
}

/** A job event; `origin` says whether this process ran the job (`job`, `error` and `result` are then set). */
export type JobEvent = LocalJobEvent | FleetJobEvent;
