/**
 * Exit codes a script can rely on:
 *   0  done
 *   1  ran, but the thing asked for is not there or did not change (unknown
 *      job or schedule, a job in a state the action does not apply to), or
 *      `health` found a problem
 *   2  the command line was wrong (unknown command or option, bad value)
 *   3  the database could not be used: unreachable, refused the login, too
 *      old, or Stampeded is not installed in the schema
 */
export const EXIT = { ok: 0, failed: 1, usage: 2, database: 3 } as const;

/** An error the CLI reports as one line, with its exit code. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}
