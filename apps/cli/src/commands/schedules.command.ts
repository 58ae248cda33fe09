import type { Command } from 'commander';
import { SCHEDULE_NOT_FOUND } from '../cli.messages.js';
import { CliError, EXIT } from '../connection/cli-errors.js';
import { emit, table } from '../output/output.js';
import { withConnection } from './command-context.js';

export function registerSchedules(program: Command): void {
  const schedules = program.command('schedules').description('list, pause, resume and trigger recurring schedules');

  schedules
    .command('list')
    .description('every schedule with its rule and next run in its own time zone')
    .action((_opts, command: Command) =>
      withConnection(command, async ({ inspector }, options) => {
        const rows = await inspector.schedules();
        emit(options, rows, () =>
          rows.length
            ? table(
                ['KEY', 'QUEUE', 'TASK', 'RULE', 'NEXT RUN (LOCAL)', 'TIME ZONE', 'PAUSED'],
                rows.map((s) => [s.key, s.queue, s.task, s.cron_expr ?? `every ${s.interval_secs}s`, s.next_run_local, s.timezone, s.paused ? 'yes' : 'no']),
              )
            : 'no schedules',
        );
      }),
    );

  schedules
    .command('trigger')
    .description("enqueue a schedule's job once, now; its regular runs stay as they were")
    .argument('<key>', 'the schedule key')
    .action((key: string, _opts, command: Command) =>
      withConnection(command, async ({ inspector }, options) => {
        const job = await inspector.triggerSchedule(key);
        if (!job) throw new CliError(SCHEDULE_NOT_FOUND(key), EXIT.failed);
        emit(options, { key, job }, () => `schedule ${key} triggered: job ${job.id} in ${job.queue}`);
      }),
    );

  for (const [name, paused] of [
    ['pause', true],
    ['resume', false],
  ] as const) {
    schedules
      .command(name)
      .description(paused ? 'stop a schedule from firing until it is resumed' : 'let a paused schedule fire again')
      .argument('<key>', 'the schedule key')
      .action((key: string, _opts, command: Command) =>
        withConnection(command, async ({ inspector }, options) => {
          if (!(await inspector.setSchedulePaused(key, paused))) throw new CliError(SCHEDULE_NOT_FOUND(key), EXIT.failed);
          emit(options, { key, paused }, () => `schedule ${key} ${paused ? 'paused' : 'resumed'}`);
        }),
      );
  }
}
