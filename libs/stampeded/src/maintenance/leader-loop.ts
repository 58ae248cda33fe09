/** What a leader check tells the maintenance service. */
export interface LeaderElectionHandlers {
  onElected(): void;
  onDeposed(reason: string): void;
}

/**
 * The beat shared by both ways of choosing the maintenance leader
 * (LeaderElection's session lock, LeaderLease's lease row): one check at
 * start, then one every `intervalMs` after the last one ended, never two at
 * once, and none after stop.
 */
export abstract class LeaderLoop {
  private timer?: NodeJS.Timeout;
  private checking?: Promise<void>;
  protected stopped = false;

  protected constructor(protected readonly intervalMs: number) {}

  abstract get isLeader(): boolean;

  start(): void {
    this.stopped = false;
    void this.check();
  }

  /** One check: take, keep or lose the leadership. Never throws. */
  protected abstract checkOnce(): Promise<void>;

  private async check(): Promise<void> {
    if (this.stopped) return;
    this.checking = this.checkOnce();
    await this.checking;
    this.checking = undefined;
    // Unreferenced: housekeeping never keeps a process alive on its own --
    // not even one whose app failed to start after the election began,
    // which nobody will ever close.
    if (!this.stopped) this.timer = setTimeout(() => void this.check(), this.intervalMs).unref();
  }

  /** Ends the beat, once the check under way (if any) has ended. */
  protected async stopChecks(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.checking;
  }
}
