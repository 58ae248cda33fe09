import type { Command } from 'commander';
import { userInfo } from 'node:os';
import { connect, type CliConnection } from '../connection/cli-connection.js';
import type { CliIo } from '../output/output.js';
import { NO_INSTANCE_URL, PROGRAM_WITHOUT_IO } from '../cli.messages.js';
import { CliError, EXIT } from '../connection/cli-errors.js';
import { DEFAULT_INSTANCE } from '@stampeded/nestjs/internal';

export interface GlobalOptions {
  url?: string;
  schema: string;
  /** The instance (forRoot's `name`) of an app with several databases; undefined: the default one. */
  instance?: string;
  json?: boolean;
  io: CliIo;
}

/** Each program's io, by its root command: two runs in one process (the tests) never share one. */
const ioByProgram = new WeakMap<Command, CliIo>();

export function bindIo(program: Command, io: CliIo): void {
  ioByProgram.set(program, io);
}

export function globals(command: Command): GlobalOptions {
  let root = command;
  while (root.parent) root = root.parent;
  const io = ioByProgram.get(root);
  if (!io) throw new Error(PROGRAM_WITHOUT_IO());
  const options = command.optsWithGlobals() as Omit<GlobalOptions, 'io'>;
  return { ...options, ...instanceConnection(options.instance ?? io.env.STAMPEDED_INSTANCE, options, root.getOptionValueSource('schema'), io.env), io };
}

/**
 * Where a named instance lives, when --url and --schema do not say: the
 * variables an app with several databases names after it, as the default
 * instance's are DATABASE_URL and STAMPEDED_SCHEMA. `--instance billing`
 * reads BILLING_DATABASE_URL and BILLING_STAMPEDED_SCHEMA.
 */
function instanceConnection(
  instance: string | undefined,
  options: Pick<GlobalOptions, 'url' | 'schema'>,
  schemaSource: string | undefined,
  env: Record<string, string | undefined>,
): Pick<GlobalOptions, 'url' | 'schema' | 'instance'> {
  if (instance === undefined || instance === '' || instance === DEFAULT_INSTANCE) return { url: options.url, schema: options.schema };
  const prefix = instanceEnvPrefix(instance);
  const url = options.url ?? env[`${prefix}_DATABASE_URL`];
  if (!url) throw new CliError(NO_INSTANCE_URL(instance, `${prefix}_DATABASE_URL`), EXIT.usage);
  const schema = schemaSource === 'cli' ? options.schema : (env[`${prefix}_STAMPEDED_SCHEMA`] ?? 'public');
  return { url, schema, instance };
}

/** An instance's name as the start of a variable's name: BILLING for billing, EU_WEST for eu-west. */
export const instanceEnvPrefix = (instance: string): string => instance.toUpperCase().replace(/[^A-Z0-9]/g, '_');

/** Runs `work` with a checked connection, and always closes it: a CLI that hangs on an open pool is a broken CLI. */
export async function withConnection<T>(
  command: Command,
  work: (connection: CliConnection, options: GlobalOptions) => Promise<T>,
  check: { installed?: boolean } = {},
): Promise<T> {
  const options = globals(command);
  const connection = await connect(options, check);
  try {
    return await work(connection, options);
  } finally {
    await connection.close();
  }
}

/** The newest migration this CLI knows, from the core's internal entry point, which loads no Nest. */
export async function latestVersion(): Promise<number> {
  return (await import('@stampeded/nestjs/internal')).LATEST_VERSION;
}

/** Who did it, for the reasons an operator's actions leave behind. */
export function operatorName(env: Record<string, string | undefined>): string {
  let user = env.USER ?? env.LOGNAME;
  try {
    user ??= userInfo().username;
  } catch {
    // No passwd entry for this uid (a container): say so rather than fail the command.
  }
  user ??= 'unknown';
  return `${user} (stampeded CLI)`;
}
