/** Which dead-letter copies to put back on their source queues, and how. */
export interface RedriveOptions {
  /** Only copies of this task. */
  task?: string;
  /**
   * Only copies whose source job failed with this error fingerprint: the
   * 64 hex characters the dashboard's errors page shows
   * (`encode(error_fingerprint, 'hex')`).
   */
  fingerprint?: string;
  /** Count what would move, per source queue and task, and move nothing. */
  dryRun?: boolean;
  /** Copies moved per statement (and per transaction); 1 to 10,000, default 1,000. */
  batchSize?: number;
  /** Called after each batch with the copies moved so far. */
  onProgress?: (moved: number) => void;
}

/** The copies of one task that went back (or would go back) to one source queue. */
export interface RedriveSource {
  sourceQueue: string;
  task: string;
  jobs: number;
}

export interface RedriveResult {
  /** The dead-letter queue. */
  queue: string;
  dryRun: boolean;
  /** Copies moved by this call, or that would move on a dry run. */
  moved: number;
  /** The same, per source queue and task, in that order. */
  bySource: RedriveSource[];
}
