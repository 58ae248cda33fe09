import type { Command } from 'commander';
import { EXIT } from '../connection/cli-errors.js';
import { emit, table } from '../output/output.js';
import { latestVersion, withConnection } from './command-context.js';

export function registerHealth(program: Command): void {
  program
    .command('health')
    .description('partitions, vacuum, sparse indexes and schema version; exits 1 when something needs fixing')
    .action((_opts, command: Command) =>
      withConnection(command, async ({ inspector }, options) => {
        const [health, LATEST_VERSION] = await Promise.all([inspector.health(), latestVersion()]);
        const version = Math.max(0, ...health.migrations.map((m) => Number(m.version)));
        const problems: string[] = [];
        const warnings: string[] = [];
        if (version < LATEST_VERSION) problems.push(`schema is at version ${version}, latest is ${LATEST_VERSION}: run stampeded migrate`);
        for (const p of health.partitions) {
          if (!p.has_notify || !p.has_counts) {
            problems.push(`partition ${p.partition} (${p.queue}) lacks its ${!p.has_counts ? 'counter' : 'notify'} trigger: its counts or wake-ups are wrong`);
          }
        }
        if (!health.maintenanceLeader) warnings.push('no process leads maintenance: dead workers are not reaped, nothing is pruned');
        // The core's rule: a table merely due is autovacuum's next round's work, not a warning.
        for (const v of health.vacuum) {
          if (v.standing === 'off')
            warnings.push(`${v.relname} is not vacuumed: autovacuum is off for it, with ${v.dead_tuples} dead tuples over ${v.live_tuples} live`);
        }
        for (const i of health.indexes)
          if (i.sparse) warnings.push(`index ${i.indexname} is sparse (${Number(i.per_page).toFixed(1)} entries a page): REINDEX CONCURRENTLY it`);
        const healthy = problems.length === 0;
        emit(options, { healthy, problems, warnings, ...health }, () =>
          [
            healthy ? 'healthy' : 'UNHEALTHY',
            ...problems.map((p) => `problem: ${p}`),
            ...warnings.map((w) => `warning: ${w}`),
            '',
            table(
              ['PARTITION', 'QUEUE', 'NOTIFY TRIGGER', 'COUNTER TRIGGER'],
              health.partitions.map((p) => [p.partition, p.queue, p.has_notify, p.has_counts]),
            ),
          ].join('\n'),
        );
        if (!healthy) options.io.exitCode = EXIT.failed;
      }),
    );
}
