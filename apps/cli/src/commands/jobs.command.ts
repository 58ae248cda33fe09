import type { Command } from 'commander';
import { JOB_STATES, envelopeOf, envelopeOfText } from '@stampeded/nestjs/internal';
import type { JobLogs } from '@stampeded/nestjs';
import { JOB_NOT_FOUND, NOT_CHANGED } from '../cli.messages.js';
import { CliError, EXIT } from '../connection/cli-errors.js';
import { cell, emit, fields, positiveInt, table } from '../output/output.js';
import { operatorName, withConnection } from './command-context.js';

export function registerJobs(program: Command): void {
  const jobs = program.command('jobs').description('list, show, retry, cancel and discard jobs');

  jobs
    .command('list')
    .description('jobs newest first within each queue, a page at a time (keyset pagination: fast at any depth)')
    .option('--queue <queue>', 'only this queue')
    .option('--state <state>', `only this state: ${JOB_STATES.join(', ')}`)
    .option('--task <task>', 'only this task')
    .option('--tenant <tenant>', 'only this tenant')
    .option('--destination <destination>', 'only this destination')
    .option('--id <id>', "a job's id, or its last hex digits as the list shows them (4 or more)")
    .option('--fingerprint <hex>', "an error fingerprint's first 8 to 64 hex digits, as the errors page shows it")
    .option('--args <json>', 'jobs whose args contain this JSON object, such as \'{"orderId": 42}\'')
    .option('--meta <json>', 'jobs whose meta contains this JSON object')
    .option('--limit <n>', 'rows per page (at most 500)', positiveInt('--limit'), 50)
    .option('--after <cursor>', 'the page after this cursor (printed under the previous page)')
    .option('--scan <n>', 'a search no index serves (a task without a queue, an id tail, args, meta) reads at most n jobs per page (default 20000)')
    .action((opts, command: Command) =>
      withConnection(command, async ({ inspector }, options) => {
        const page = await inspector.jobs(opts);
        emit(options, page, () => {
          const rows = page.jobs.map((j) => [j.id, j.queue, j.task, j.state, `${j.attempt}/${j.max_attempts}`, j.scheduled_at, j.last_error]);
          const body = rows.length ? table(['ID', 'QUEUE', 'TASK', 'STATE', 'ATTEMPT', 'SCHEDULED', 'LAST ERROR'], rows) : '';
          if (page.scan?.ranOut) {
            // The budget ran out before a page matched: say how far it read,
            // and hand on the cursor from where it stopped.
            const span = `the ${opts.after ? 'next' : 'first'} ${page.scan.budget.toLocaleString('en')} jobs`;
            const found = rows.length
              ? `${rows.length === 1 ? '1 match' : `${rows.length} matches`} found in ${span}`
              : `no ${opts.after ? 'more ' : ''}${opts.state ? `${opts.state} ` : ''}${opts.task ? `jobs of task ${opts.task}` : 'matching jobs'} among ${span}`;
            return `${body ? `${body}\n\n` : ''}${found}; search further: --after ${page.next}`;
          }
          if (!rows.length) return 'no jobs';
          return page.next ? `${body}\n\nnext page: --after ${page.next}` : body;
        });
      }),
    );

  jobs
    .command('show')
    .description('one job in full: args, meta, progress, result, log, errors, attempts, checkpoint, dead-letter provenance')
    .argument('<id>', 'the job id')
    .option('--queue <queue>', 'the job queue (faster on a big table)')
    .action((id: string, opts: { queue?: string }, command: Command) =>
      withConnection(command, async ({ inspector }, options) => {
        const job = await inspector.job(id, opts.queue);
        if (!job) throw new CliError(JOB_NOT_FOUND(id), EXIT.failed);
        emit(options, job, () => {
          const { args, meta, errors, checkpoint, progress, result, logs, ...rest } = job;
          const errorLines = (errors as { at: string; attempt: number; kind: string; message: string }[]).map(
            (e) => `  #${e.attempt} ${e.at} ${e.kind}: ${cell(e.message)}`,
          );
          const log = logs as JobLogs;
          // A line of several lines keeps them, indented under its own.
          const logLines = log.lines.map((l) => `  #${l.attempt} ${cell(l.at)} ${storedLine(l.message).replace(/\n/g, '\n    ')}`);
          if (log.dropped) logLines.unshift(`  (${log.dropped} older line${log.dropped === 1 ? '' : 's'} dropped)`);
          return [
            fields(Object.entries(rest).filter(([k]) => k !== 'dedup_key')),
            `args:       ${stored(args)}`,
            `meta:       ${JSON.stringify(meta)}`,
            `progress:   ${progress == null ? '-' : JSON.stringify(progress)}`,
            `result:     ${result == null ? '-' : stored(result)}`,
            `log:        ${logLines.length ? `\n${logLines.join('\n')}` : '-'}`,
            `checkpoint: ${checkpoint === null ? '-' : JSON.stringify(checkpoint)}`,
            `errors:     ${errorLines.length ? `\n${errorLines.join('\n')}` : '-'}`,
          ].join('\n');
        });
      }),
    );

  for (const [name, description, action] of [
    ['retry', 'run a discarded or cancelled job again with a fresh attempt budget, or a waiting one now', 'retry'],
    ['cancel', 'cancel a job that has not finished; a running handler sees its abort signal', 'cancel'],
    ['discard', 'finish a waiting job as discarded without running it again', 'discard'],
  ] as const) {
    jobs
      .command(name)
      .description(description)
      .argument('<id>', 'the job id')
      .option('--queue <queue>', 'the job queue (faster on a big table)')
      .action((id: string, opts: { queue?: string }, command: Command) =>
        withConnection(command, async ({ inspector }, options) => {
          const result =
            action === 'retry'
              ? await inspector.retry(id, opts.queue)
              : action === 'cancel'
                ? await inspector.cancel(id, opts.queue)
                : await inspector.discard(id, opts.queue, operatorName(options.io.env));
          if (!result) throw new CliError(JOB_NOT_FOUND(id), EXIT.failed);
          if (!result.changed) throw new CliError(NOT_CHANGED(action, id, result.state), EXIT.failed);
          emit(options, result, () => `job ${id} (${result.queue}): ${result.previousState} -> ${result.state}`);
        }),
      );
  }
}

/** Args or a result as stored; an encrypted one (docs/encryption.md) as "encrypted" and its key, not its ciphertext (the --json output keeps the envelope). */
/** A log line as stored: an encrypted job's is said to be, with its key; the CLI holds no keys. */
function storedLine(line: string): string {
  const envelope = envelopeOfText(line);
  return envelope ? `encrypted (key ${envelope.kid})` : line;
}

function stored(value: unknown): string {
  const envelope = envelopeOf(value);
  return envelope ? `encrypted (key ${envelope.kid}; readable only in a process that holds the key)` : JSON.stringify(value);
}
