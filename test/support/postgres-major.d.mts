export declare const OLDER_MAJORS: readonly number[];
export declare const MAJORS: readonly number[];
export declare function binariesOf(major: number): string;
export interface StartedPostgresMajor {
  url: string;
  major: number;
  /** The data folder, which outlives stop() only when it was passed in. */
  data: string;
  stop(): Promise<void>;
}
export declare function startPostgresMajor(
  major: number,
  options?: { durable?: boolean; maxConnections?: number; settings?: Record<string, string | number>; dataDir?: string },
): Promise<StartedPostgresMajor>;
