import type { Command } from 'commander';
import { emit, endProgress, positiveInt, progress, table } from '../output/output.js';
import { withConnection } from './command-context.js';

export function registerDlq(program: Command): void {
  const dlq = program.command('dlq').description('dead-letter queues');

  dlq
    .command('redrive')
    .description("put a dead-letter queue's copies back on their source queues as fresh jobs")
    .argument('<queue>', 'the dead-letter queue')
    .option('--task <task>', 'only copies of this task')
    .option('--fingerprint <hex>', 'only copies whose error has this fingerprint (from the errors page)')
    .option('--dry-run', 'show what would move, and move nothing')
    .option('--batch-size <n>', 'copies moved per statement', positiveInt('--batch-size'), 1000)
    .action((queue: string, opts, command: Command) =>
      withConnection(command, async ({ inspector }, options) => {
        const result = await inspector.redrive(queue, { ...opts, onProgress: (n) => progress(options.io, `redriven ${n} jobs`) });
        endProgress(options.io);
        emit(options, result, () => {
          const verb = result.dryRun ? 'would move' : 'moved';
          const lines = [`${verb} ${result.moved} job(s) from ${queue}`];
          if (result.bySource.length) {
            lines.push(
              '',
              table(
                ['TO QUEUE', 'TASK', 'JOBS'],
                result.bySource.map((r) => [r.sourceQueue, r.task, r.jobs]),
              ),
            );
          }
          return lines.join('\n');
        });
      }),
    );
}
