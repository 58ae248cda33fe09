import type { Command } from 'commander';
import { policyFromInput } from '@stampeded/dashboard/inspector';
import { emit, fields } from '../output/output.js';
import { CliError, EXIT } from '../connection/cli-errors.js';
import { POLICY_NOTHING_GIVEN } from '../cli.messages.js';
import { operatorName, withConnection } from './command-context.js';

export function registerQueues(program: Command): void {
  const queues = program.command('queues').description("pause and resume queues, and set a queue's policy");

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

  queues
    .command('policy')
    .description("set a queue's policy for every worker: a cap on its running jobs, a wait after which it is rushed")
    .argument('<queue>', 'the queue')
    .option('--max-running <n>', 'claimed or executing at most, across the fleet; none for no cap')
    .option('--max-wait-secs <n>', 'rush the queue once its head waited this long; none for no limit')
    .action((queue: string, opts: { maxRunning?: string; maxWaitSecs?: string }, command: Command) =>
      withConnection(command, async ({ inspector }, options) => {
        if (opts.maxRunning === undefined && opts.maxWaitSecs === undefined) throw new CliError(POLICY_NOTHING_GIVEN(queue), EXIT.usage);
        // What is not given keeps its value: the core's setPolicy() takes the whole policy.
        const current = await inspector.queue(queue);
        const given = policyFromInput({ maxRunning: opts.maxRunning ?? current.maxRunning, maxWaitSecs: opts.maxWaitSecs ?? current.maxWaitSecs });
        const row = await inspector.setPolicy(queue, given, operatorName(options.io.env));
        emit(options, row, () =>
          fields([
            ['queue', row.queue],
            ['max running', row.maxRunning ?? 'none'],
            ['max wait secs', row.maxWaitSecs ?? 'none'],
            ['set by', row.policyBy],
          ]),
        );
      }),
    );
}
