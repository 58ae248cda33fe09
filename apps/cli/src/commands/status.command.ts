import type { Command } from 'commander';
import { JOB_STATES } from '@stampeded/nestjs/internal';
import { emit, table } from '../output/output.js';
import { withConnection } from './command-context.js';

/** A worker silent for longer than this is shown as stale: the reaper's default (reapDeadAfter) is a minute. */
const STALE_AFTER_SECS = 60;

export function registerStatus(program: Command): void {
  program
    .command('status')
    .description('server and schema versions, jobs per queue and state, queue verdicts and pauses, workers')
    .action((_options, command: Command) =>
      withConnection(command, async ({ inspector }, options) => {
        // Not compared with the newest migration here: that needs @stampeded/nestjs,
        // a second of start-up that `status` in a watch loop should not pay. `health` compares.
        const [queues, health, { workers }] = await Promise.all([inspector.queues(), inspector.health(), inspector.workers()]);
        const schemaVersion = Math.max(0, ...health.migrations.map((m) => Number(m.version)));
        const live = workers.filter((w) => Number(w.silent_secs) <= STALE_AFTER_SECS).length;
        const result = {
          server: health.server.version,
          schema: options.schema,
          schemaVersion,
          workers: { live, stale: workers.length - live },
          queues,
        };
        emit(options, result, () =>
          [
            `PostgreSQL ${health.server.version}, schema "${options.schema}" at version ${schemaVersion}`,
            `workers: ${live} live, ${workers.length - live} stale`,
            '',
            queues.length
              ? table(
                  ['QUEUE', ...JOB_STATES.map((s) => s.toUpperCase()), 'VERDICT', 'PAUSED BY', 'HEAD WAIT'],
                  queues.map((q) => [
                    q.queue,
                    ...JOB_STATES.map((s) => q.counts[s]),
                    q.verdict,
                    q.paused ? String(q.pausedBy) : '-',
                    q.headWaitSecs === null ? '-' : `${q.headWaitSecs.toFixed(1)}s`,
                  ]),
                )
              : 'no queues yet',
          ].join('\n'),
        );
      }),
    );
}
