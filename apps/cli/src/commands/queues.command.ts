import type { Command } from 'commander';
import { emit } from '../output/output.js';
import { operatorName, withConnection } from './command-context.js';

export function registerQueues(program: Command): void {
  const queues = program.command('queues').description('pause and resume queues');

  queues
    .command('pause')
    .description("hold a queue: an operator's 'hold' verdict in its policy row, which the planner keeps and workers obey")
    .argument('<queue>', 'the queue')
    .option('--reason <why>', 'why, recorded beside who paused it')
    .action((queue: string, opts: { reason?: string }, command: Command) =>
      withConnection(command, async ({ inspector }, options) => {
        const row = await inspector.pauseQueue(queue, operatorName(options.io.env), opts.reason);
        emit(options, row, () => `queue ${queue} held (${row.reason})`);
      }),
    );

  queues
    .command('resume')
    .description("release a held queue: the verdict goes back to 'steady'")
    .argument('<queue>', 'the queue')
    .action((queue: string, _opts, command: Command) =>
      withConnection(command, async ({ inspector }, options) => {
        const row = await inspector.resumeQueue(queue, operatorName(options.io.env));
        emit(options, row, () => `queue ${queue} resumed`);
      }),
    );
}
