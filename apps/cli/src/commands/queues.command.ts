import type { Command } from 'commander';
import { emit } from '../output/output.js';
import { operatorName, withConnection } from './command-context.js';

export function registerQueues(program: Command): void {
  const queues = program.command('queues').description('pause and resume queues');

  queues
    .command('pause')
    .description('pause a queue for every worker until it is resumed: running jobs finish, no new ones are claimed')
    .argument('<queue>', 'the queue')
    .option('--reason <why>', 'why, recorded beside who paused it')
    .action((queue: string, opts: { reason?: string }, command: Command) =>
      withConnection(command, async ({ inspector }, options) => {
        const row = await inspector.pauseQueue(queue, operatorName(options.io.env), opts.reason);
        emit(options, row, () => `queue ${queue} paused by ${row.paused_by}${row.pause_reason ? `: ${row.pause_reason}` : ''}`);
      }),
    );

  queues
    .command('resume')
    .description('resume a paused queue: workers claim from it again')
    .argument('<queue>', 'the queue')
    .action((queue: string, _opts, command: Command) =>
      withConnection(command, async ({ inspector }, options) => {
        const row = await inspector.resumeQueue(queue);
        emit(options, row, () => `queue ${queue} resumed`);
      }),
    );
}
