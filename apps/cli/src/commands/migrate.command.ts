import type { Command } from 'commander';
import { connectionError, resolveUrl } from '../connection/cli-connection.js';
import { CliError, EXIT } from '../connection/cli-errors.js';
import { SERVER_TOO_OLD } from '../cli.messages.js';
import { emit, progress } from '../output/output.js';
import { globals } from './command-context.js';

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .description('install Stampeded, or bring it up to date, in --schema (one transaction: all or nothing)')
    .action(async (_options, command: Command) => {
      const options = globals(command);
      const url = resolveUrl(options);
      const started = Date.now();
      // Loaded only here: it brings Nest and TypeORM, which no other command needs.
      const [{ migrate }, { LATEST_VERSION, REQUIRED_SERVER_VERSION_NUM }] = await Promise.all([
        import('@stampeded/nestjs'),
        import('@stampeded/nestjs/internal'),
      ]);
      let applied;
      try {
        applied = await migrate(url.toString(), {
          schema: options.schema,
          onApplied: (m) => progress(options.io, `applied migration ${m.version} (${m.name})`),
        });
      } catch (err) {
        const message = (err as Error).message ?? '';
        // Every difference it found, one a line: the user fixes them all before the next try.
        if ((err as Error).name === 'SeedMismatchError') throw new CliError(message, EXIT.database);
        if ((err as Error).name === 'StampededConfigError') {
          const version = /PostgreSQL (\S+?)\.? Upgrade/.exec(message)?.[1];
          throw new CliError(version ? SERVER_TOO_OLD(version, REQUIRED_SERVER_VERSION_NUM) : message.split('\n')[0], EXIT.database);
        }
        if ((err as { code?: string }).code) throw connectionError(err, url);
        throw err;
      }
      const result = {
        schema: options.schema,
        version: LATEST_VERSION,
        applied: applied.migrations.map((m) => ({ version: m.version, name: m.name })),
        functions: applied.functions,
        adopted: applied.adopted ? { version: applied.adopted.version, name: applied.adopted.name } : null,
      };
      const adopted = applied.adopted
        ? `adopted the seed schema ("stampeded 0.3.1") already installed in schema "${options.schema}" as migration ${applied.adopted.version}; `
        : '';
      emit(options, result, () =>
        applied.migrations.length || applied.functions.length || applied.adopted
          ? `${adopted}schema "${options.schema}" migrated to version ${LATEST_VERSION}: applied ${applied.migrations.length} migration(s) ` +
            `and ${applied.functions.length} function(s) in ${Date.now() - started} ms`
          : `schema "${options.schema}" is up to date (version ${LATEST_VERSION})`,
      );
    });
}
