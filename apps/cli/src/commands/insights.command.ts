import type { Command } from 'commander';
import { emit, fields, table } from '../output/output.js';
import { withConnection } from './command-context.js';

/** A percentile as the dashboard says it: under 1 ms is the histogram's first bucket. */
const ms = (value: number | null) => (value === null ? '-' : value < 1 ? '<1 ms' : value < 1000 ? `${Math.round(value)} ms` : `${(value / 1000).toFixed(1)} s`);
const percentiles = (p: { p50: number | null; p95: number | null; p99: number | null }) => `p50 ${ms(p.p50)}, p95 ${ms(p.p95)}, p99 ${ms(p.p99)}`;

export function registerInsights(program: Command): void {
  program
    .command('insights')
    .description("outcomes, retries, waits and runs over the last hour, day or week, from the maintenance leader's rollup")
    .option('--queue <queue>', 'one queue (default: every queue)')
    .option('--task <task>', 'one task (default: every task)')
    .option('--range <range>', 'hour (a row a minute), day or week (a row an hour)', 'hour')
    .action((opts: { queue?: string; task?: string; range: string }, command: Command) =>
      withConnection(command, async ({ inspector }, options) => {
        const data = await inspector.insights(opts);
        const t = data.totals;
        emit(options, data, () =>
          [
            fields([
              ['range', `last ${data.range}, ${data.queue ? `queue ${data.queue}` : 'every queue'}, ${data.task ? `task ${data.task}` : 'every task'}`],
              ['finished', `${t.completed} completed, ${t.discarded} discarded, ${t.cancelled} cancelled`],
              ['failed attempts', `${t.failed}, ${t.retried} of them retried`],
              ['wait before start', percentiles(t.wait)],
              ['run time', percentiles(t.run)],
              ['counted up to', data.through ?? 'nothing yet: the rollup has not run'],
            ]),
            '',
            table(
              [data.grain.toUpperCase(), 'COMPLETED', 'DISCARDED', 'CANCELLED', 'FAILED', 'RETRIED', 'WAIT P95', 'RUN P95'],
              data.points
                .filter((p) => p.completed + p.discarded + p.cancelled + p.failed > 0)
                .map((p) => [
                  new Date(p.at * 1000).toISOString().slice(0, 16).replace('T', ' '),
                  p.completed,
                  p.discarded,
                  p.cancelled,
                  p.failed,
                  p.retried,
                  ms(p.wait.p95),
                  ms(p.run.p95),
                ]),
            ),
            '',
            table(
              ['BUSIEST TENANT', 'JOBS', 'DISCARDED'],
              data.tenants.map((k) => [k.key, k.jobs, k.discarded]),
            ),
            '',
            table(
              ['BUSIEST DESTINATION', 'JOBS', 'DISCARDED'],
              data.destinations.map((k) => [k.key, k.jobs, k.discarded]),
            ),
          ].join('\n'),
        );
      }),
    );
}
