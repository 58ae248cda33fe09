import { CommanderError } from 'commander';
import { InspectorInputError } from '@stampeded/dashboard/inspector';
import { buildProgram } from './cli.program.js';
import { CliError, EXIT } from './connection/cli-errors.js';
import type { CliIo } from './output/output.js';

/**
 * One run of the CLI: `argv` without node and the script, output to `io`.
 * Answers the exit code rather than exiting, so the tests run it in-process.
 */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  const program = buildProgram(io);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return io.exitCode ?? EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    if (err instanceof CliError) {
      io.stderr.write(`stampeded: ${err.message}\n`);
      return err.exitCode;
    }
    if (err instanceof InspectorInputError) {
      io.stderr.write(`stampeded: ${err.message}\n`);
      return EXIT.usage;
    }
    const e = err as { message?: string; code?: string };
    io.stderr.write(`stampeded: ${(e.message ?? String(err)).split('\n')[0]}${e.code ? ` (SQLSTATE ${e.code})` : ''}\n`);
    // Class 22 is PostgreSQL refusing a value the user typed (an interval
    // such as --failed-older-than banana): a usage error, not a failure.
    return e.code?.startsWith('22') ? EXIT.usage : EXIT.failed;
  }
}
