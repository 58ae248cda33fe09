import { Command } from 'commander';
import { registerMigrate } from './commands/migrate.command.js';
import { registerStatus } from './commands/status.command.js';
import { registerJobs } from './commands/jobs.command.js';
import { registerSchedules } from './commands/schedules.command.js';
import { registerQueues } from './commands/queues.command.js';
import { registerBreakers } from './commands/breakers.command.js';
import { registerHealth } from './commands/health.command.js';
import { registerInsights } from './commands/insights.command.js';
import { registerPrune } from './commands/prune.command.js';
import { registerDlq } from './commands/dlq.command.js';
import { registerWorkflows } from './commands/workflows.command.js';
import { registerEncryption } from './commands/encryption.command.js';
import { bindIo } from './commands/command-context.js';
import type { CliIo } from './output/output.js';

export function buildProgram(io: CliIo): Command {
  const program = new Command('stampeded');
  bindIo(program, io);
  // First, so that every subcommand inherits it: help and usage errors go where the results go.
  program.configureOutput({ writeOut: (text) => void io.stdout.write(text), writeErr: (text) => void io.stderr.write(text) });
  program
    .description('Operate a Stampeded job queue: migrate it, see it, and act on its jobs, queues and schedules.')
    .version('0.1.0')
    .option('--url <url>', 'PostgreSQL connection URL (default: $DATABASE_URL)')
    .option('--schema <schema>', 'the schema Stampeded is installed in', io.env.STAMPEDED_SCHEMA ?? 'public')
    .option(
      '--instance <name>',
      "the instance of an app with several databases (forRoot's name): its <NAME>_DATABASE_URL and <NAME>_STAMPEDED_SCHEMA (default: $STAMPEDED_INSTANCE)",
    )
    .option('--json', 'print results as JSON, for scripts')
    .showHelpAfterError()
    .addHelpText(
      'after',
      '\nExit codes: 0 done; 1 not found, not changed, or unhealthy; 2 bad command line; 3 database unreachable, too old, or not installed.\n',
    );
  program.exitOverride();
  registerMigrate(program);
  registerStatus(program);
  registerJobs(program);
  registerSchedules(program);
  registerQueues(program);
  registerBreakers(program);
  registerHealth(program);
  registerInsights(program);
  registerPrune(program);
  registerDlq(program);
  registerWorkflows(program);
  registerEncryption(program);
  // Commander's own exits (help, version, usage errors) come back to run(),
  // so that every exit code is one of ours.
  for (const command of program.commands.flatMap((c) => [c, ...c.commands])) command.exitOverride();
  return program;
}
