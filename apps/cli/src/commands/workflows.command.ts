import type { Command } from 'commander';
import { workflowCountsText, workflowTree } from '@stampeded/dashboard/inspector';
import { WORKFLOW_NOT_FOUND } from '../cli.messages.js';
import { CliError, EXIT } from '../connection/cli-errors.js';
import { emit, fields, positiveInt, table } from '../output/output.js';
import { operatorName, withConnection } from './command-context.js';

export function registerWorkflows(program: Command): void {
  const workflows = program.command('workflows').description('list workflows and batches, show one as a tree, cancel one whole');

  workflows
    .command('list')
    .description('workflows and batches, newest first, with their jobs counted by state')
    .option('--name <name>', 'only workflows with this name')
    .option('--limit <n>', 'how many (1-1000)', positiveInt('--limit'), 50)
    .action((opts: { name?: string; limit: number }, command: Command) =>
      withConnection(command, async ({ inspector }, options) => {
        const rows = await inspector.workflows({ name: opts.name, limit: opts.limit });
        emit(options, rows, () =>
          rows.length
            ? table(
                ['ID', 'NAME', 'KIND', 'JOBS', 'STATE', 'COUNTS', 'ENQUEUED'],
                rows.map((w) => [w.id, w.name, w.kind, w.jobs, w.state, workflowCountsText(w.counts), w.insertedAt]),
              )
            : 'no workflows',
        );
      }),
    );

  workflows
    .command('show')
    .description("a workflow's jobs as a tree: each job above the jobs it waits for")
    .argument('<id>', 'the workflow id')
    .action((id: string, _opts, command: Command) =>
      withConnection(command, async ({ inspector }, options) => {
        const workflow = await inspector.workflow(id);
        if (!workflow) throw new CliError(WORKFLOW_NOT_FOUND(id), EXIT.failed);
        emit(options, workflow, () => {
          const head = fields([
            ['id', workflow.id],
            ['name', workflow.name],
            ['kind', workflow.kind],
            ['state', workflow.state],
            ['jobs', workflowCountsText(workflow.counts)],
          ]);
          const tree = workflowTree(workflow.jobs).map((line) => {
            const job = line.job;
            const notes = [line.ignoreFailure ? 'runs even if this fails' : '', line.repeat ? 'shown above' : '', job.lastError ?? ''].filter(Boolean);
            return `${'  '.repeat(line.depth)}${job.name}  ${job.state}  ${job.task ?? '-'}  ${job.id}${notes.length ? `  (${notes.join('; ')})` : ''}`;
          });
          return `${head}\n\n${tree.join('\n')}`;
        });
      }),
    );

  workflows
    .command('cancel')
    .description('cancel every job of a workflow that has not finished; running handlers see their abort signal')
    .argument('<id>', 'the workflow id')
    .option('--reason <why>', 'why, recorded on each cancelled job')
    .action((id: string, opts: { reason?: string }, command: Command) =>
      withConnection(command, async ({ inspector }, options) => {
        const by = `by ${operatorName(options.io.env)}`;
        const reason = opts.reason ? `${opts.reason}, ${by}` : by;
        const result = await inspector.cancelWorkflow(id, reason);
        if (!result) throw new CliError(WORKFLOW_NOT_FOUND(id), EXIT.failed);
        emit(options, result, () => `workflow ${id}: ${result.cancelled} job(s) cancelled`);
      }),
    );
}
