/** Where a running job's batched reports go: ProgressReporter's values, LogReporter's lines. */
export interface ReportSink<Batch> {
  /**
   * Writes a batch, fenced by the run's (claimed_by, attempt): true when it
   * was written, false when the job is no longer this worker's, undefined
   * when the database did not take it (the sink says why in the log): it
   * goes again with the next write.
   */
  write(batch: Batch): Promise<boolean | undefined>;
  /** What waits after a write that did not go: the batch that failed, with what came since. */
  putBack(failed: Batch, since: Batch | undefined): Batch;
}

/**
 * When a running job's reports are written. The first goes at once; what
 * comes while a write is under way, or within the interval after it, waits
 * and goes when the interval ends: a handler that reports in a tight loop
 * writes once an interval, whatever its rate. flush() writes what waits,
 * before the run's outcome is recorded; stop() drops it. Once a write finds
 * the job no longer this worker's, nothing more is written.
 */
export class ReportSchedule<Batch> {
  private pending?: Batch;
  private writing?: Promise<boolean>;
  private timer?: NodeJS.Timeout;
  private owned = true;
  private closed = false;

  constructor(
    private readonly sink: ReportSink<Batch>,
    private readonly intervalMs: number,
  ) {}

  /** What waits for the next write, for a report that adds to it rather than replaces it. */
  get waiting(): Batch | undefined {
    return this.pending;
  }

  /**
   * Makes `batch` what the next write carries. Resolves true when it was
   * written or will be with the next write, false when the job is no longer
   * this worker's (nothing is written then, nor afterwards).
   */
  report(batch: Batch): Promise<boolean> {
    if (!this.owned || this.closed) return Promise.resolve(false);
    this.pending = batch;
    if (this.writing || this.timer) return Promise.resolve(true);
    return this.writeNext();
  }

  /** Writes what waits, if anything, and ends the schedule: called before the run's outcome is recorded. */
  async flush(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.writing) await this.writing;
    const last = this.pending;
    this.pending = undefined;
    if (last !== undefined && this.owned) await this.write(last);
    this.pending = undefined;
  }

  /** Ends the schedule without writing what waits: the job is no longer ours. */
  stop(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.pending = undefined;
  }

  /** Writes what waits now, and holds the next write back for the interval. */
  private writeNext(): Promise<boolean> {
    const next = this.pending!;
    this.pending = undefined;
    const written = this.write(next);
    this.writing = written;
    void written.then(() => {
      this.writing = undefined;
      if (this.closed || !this.owned) return;
      this.timer = setTimeout(() => {
        this.timer = undefined;
        if (this.pending !== undefined && !this.closed && this.owned) void this.writeNext();
      }, this.intervalMs);
      this.timer.unref?.();
    });
    return written;
  }

  private async write(batch: Batch): Promise<boolean> {
    const owned = await this.sink.write(batch);
    if (owned === undefined) {
      this.pending = this.sink.putBack(batch, this.pending);
      return true;
    }
    if (!owned) {
      this.owned = false;
      this.pending = undefined;
    }
    return owned;
  }
}
