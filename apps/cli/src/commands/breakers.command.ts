import type { Command } from 'commander';
import { emit, table } from '../output/output.js';
import { CliError, EXIT } from '../connection/cli-errors.js';
import { BREAKER_NOT_FOUND } from '../cli.messages.js';
import { operatorName, withConnection } from './command-context.js';

export function registerBreakers(program: Command): void {
  const breakers = program.command('breakers').description('list circuit breakers (per destination) and reset them');

  breakers
    .command('list')
    .description('every destination whose breaker has moved, its state, and who opened or last reset it')
    .action((_opts, command: Command) =>
      withConnection(command, async ({ inspector }, options) => {
        const rows = await inspector.breakers();
        emit(options, rows, () =>
          rows.length
            ? table(
                ['DESTINATION', 'STATE', 'FAILURES', 'OPEN UNTIL', 'OPENED BY', 'REASON', 'LAST RESET BY'],
                rows.map((b) => [b.destination, b.state, b.failures, b.openUntil, b.openedBy, b.reason, b.closedBy]),
              )
            : 'no breaker has moved yet',
        );
      }),
    );

  breakers
    .command('reset')
    .description("close a destination's breaker for every worker: the jobs it deferred are due at once")
    .argument('<destination>', 'the destination')
    .action((destination: string, _opts, command: Command) =>
      withConnection(command, async ({ inspector }, options) => {
        const breaker = await inspector.closeBreaker(destination, operatorName(options.io.env));
        if (!breaker) throw new CliError(BREAKER_NOT_FOUND(destination), EXIT.failed);
        emit(options, breaker, () => `breaker for ${destination} closed by ${breaker.closedBy}`);
      }),
    );
}
