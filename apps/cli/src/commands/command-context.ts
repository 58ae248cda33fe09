import type { Command } from 'commander';
import { userInfo } from 'node:os';
import { connect, type CliConnection } from '../connection/cli-connection.js';

export interface GlobalOptions {
  url?: string;
  schema: string;
  json?: boolean;
}

export function globals(command: Command): GlobalOptions {
  return command.optsWithGlobals() as GlobalOptions;
}

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

/**
 * The newest migration this CLI knows, from @stampeded/nestjs. Loaded on
 * demand, beside the queries, because that package brings Nest and TypeORM.
 */
export async function latestVersion(): Promise<number> {
  return (await import('@stampeded/nestjs')).LATEST_VERSION;
}

/** Who did it, for the reasons an operator's actions leave behind. */
export function operatorName(): string {
  let user = process.env.USER ?? process.env.LOGNAME;
  try {
    user ??= userInfo().username;
  } catch {
    // No passwd entry for this uid (a container): say so rather than fail the command.
  }
  user ??= 'unknown';
  return `${user} (stampeded CLI)`;
}
