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

export interface JobEvent {
  type: JobEventType;
  job: Job;
  workerId: string;
  error?: string;
  failureKind?: FailureKind;
  retryDelayMs?: number;
  deadLettered?: boolean;
  durationMs?: number;
  result?: unknown;
  progress?: JobProgress;
}
