import type { Command } from 'commander';
import { emit, endProgress, positiveInt, progress } from '../output/output.js';
import { withConnection } from './command-context.js';

export function registerPrune(program: Command): void {
  program
    .command('prune')
    .description('delete finished jobs past their retention, in batches, and old schedule occurrences')
    .option('--completed-older-than <interval>', 'keep completed jobs this long (a PostgreSQL interval)', '1 hour')
    .option('--failed-older-than <interval>', 'keep discarded and cancelled jobs this long', '7 days')
    .option('--occurrences-older-than <interval>', 'keep the schedule occurrence ledger this long', '30 days')
    .option('--batch-size <n>', 'rows deleted per statement', positiveInt('--batch-size'), 10_000)
    .action((opts, command: Command) =>
      withConnection(command, async ({ inspector }, options) => {
        const result = await inspector.prune({ ...opts, onProgress: (n) => progress(options.io, `pruned ${n} jobs`) });
        endProgress(options.io);
        emit(options, result, () => `pruned ${result.jobs} jobs and ${result.occurrences} schedule occurrences`);
      }),
    );
}
