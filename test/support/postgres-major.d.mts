export declare const OLDER_MAJORS: readonly number[];
export declare const MAJORS: readonly number[];
export declare function binariesOf(major: number): string;
export interface StartedPostgresMajor {
  url: string;
  major: number;
  /** The data folder, which outlives stop() only when it was passed in. */
  data: string;
  port: number;
  /** The postmaster's process id. */
  pid: number;
  /** Sends the postmaster `signal` (SIGKILL: a crash, no shutdown checkpoint) and resolves once it has exited. */
  kill(signal: NodeJS.Signals): Promise<void>;
  stop(): Promise<void>;
}
export declare function startPostgresMajor(
  major: number,
  options?: { durable?: boolean; maxConnections?: number; settings?: Record<string, string | number>; dataDir?: string },
): Promise<StartedPostgresMajor>;
