import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { EncryptionRotator, JobCipher, ROTATE_BATCH_SIZE, StampededConfigError } from '@stampeded/nestjs/internal';
import { ENCRYPTION_KEYS_NEEDED, ENCRYPTION_KEYS_UNREADABLE } from '../cli.messages.js';
import { CliError, EXIT } from '../connection/cli-errors.js';
import { emit, endProgress, positiveInt, progress, table } from '../output/output.js';
import { globals, withConnection } from './command-context.js';

/** The environment variable that holds the keys' JSON when --keys-file is not given. */
export const KEYS_ENV = 'STAMPEDED_ENCRYPTION_KEYS';

export function registerEncryption(program: Command): void {
  const encryption = program.command('encryption').description('encrypted args and results (docs/encryption.md)');

  encryption
    .command('rotate')
    .description(
      're-encrypt the args and results stored under older keys with the current one, jobs (dead letters too) and schedules, in batches; a running job is left for the next run',
    )
    .option('--keys-file <path>', `a JSON file { "keys": { "<id>": "<base64>", ... }, "current": "<id>" } (default: $${KEYS_ENV}, the same JSON)`)
    .option('--batch-size <n>', 'jobs read and written per statement', positiveInt('--batch-size'), ROTATE_BATCH_SIZE)
    .option('--dry-run', 'count what would be re-encrypted, and change nothing')
    .action((opts: { keysFile?: string; batchSize: number; dryRun?: boolean }, command: Command) => {
      // Before connecting: keys that cannot be read are a usage error, whatever the database.
      const cipher = loadKeys(opts.keysFile, globals(command).io.env);
      return withConnection(command, async ({ db }, options) => {
        const result = await new EncryptionRotator(db, cipher).rotate(
          { batchSize: opts.batchSize, dryRun: opts.dryRun, onProgress: (n) => progress(options.io, `re-encrypted ${n} jobs`) },
          'stampeded encryption rotate',
        );
        endProgress(options.io);
        emit(options, result, () => {
          const verb = result.dryRun ? 'would re-encrypt' : 're-encrypted';
          const lines = [`${verb} ${result.jobs} job(s) and ${result.schedules} schedule(s) with key ${result.current}`];
          const from = Object.entries(result.fromKeys);
          if (from.length) lines.push('', table(['FROM KEY', 'VALUES'], from));
          if (result.running) lines.push(`${result.running} running job(s) left as they were: run the command again once they have finished`);
          for (const [key, n] of Object.entries(result.unreadable)) lines.push(`${n} under key ${key}, which was not given: left as they were`);
          return lines.join('\n');
        });
      });
    });
}

/** The keys, from the file or the environment, checked as forRoot() checks its `encryption` option. */
function loadKeys(file: string | undefined, env: Record<string, string | undefined>): JobCipher {
  const where = file ? `--keys-file ${file}` : `$${KEYS_ENV}`;
  let text: string | undefined;
  try {
    text = file ? readFileSync(file, 'utf8') : env[KEYS_ENV];
  } catch (err) {
    throw new CliError(ENCRYPTION_KEYS_UNREADABLE(where, (err as Error).message), EXIT.usage);
  }
  if (!text) throw new CliError(ENCRYPTION_KEYS_NEEDED(), EXIT.usage);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new CliError(ENCRYPTION_KEYS_UNREADABLE(where, (err as Error).message), EXIT.usage);
  }
  try {
    return JobCipher.from(where, parsed as never);
  } catch (err) {
    if (err instanceof StampededConfigError) throw new CliError(err.message, EXIT.usage);
    throw err;
  }
}
