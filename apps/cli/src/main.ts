#!/usr/bin/env node
import { CommanderError } from 'commander';
import { buildProgram } from './cli.program.js';
import { CliError, EXIT } from './connection/cli-errors.js';
import { InspectorInputError } from '@stampeded/dashboard/inspector';

const program = buildProgram();
// Commander's own exits (help, version, usage errors) come back here, so that
// every exit code is one of ours.
program.exitOverride();
for (const command of program.commands.flatMap((c) => [c, ...c.commands])) command.exitOverride();

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    process.exitCode = err.exitCode === 0 ? EXIT.ok : EXIT.usage;
  } else if (err instanceof CliError) {
    process.stderr.write(`stampeded: ${err.message}\n`);
    process.exitCode = err.exitCode;
  } else if (err instanceof InspectorInputError) {
    process.stderr.write(`stampeded: ${err.message}\n`);
    process.exitCode = EXIT.usage;
  } else {
    const e = err as { message?: string; code?: string };
    process.stderr.write(`stampeded: ${(e.message ?? String(err)).split('\n')[0]}${e.code ? ` (SQLSTATE ${e.code})` : ''}\n`);
    // Class 22 is PostgreSQL refusing a value the user typed (an interval
    // such as --failed-older-than banana): a usage error, not a failure.
    process.exitCode = e.code?.startsWith('22') ? EXIT.usage : EXIT.failed;
  }
}
