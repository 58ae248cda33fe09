import type { Command } from 'commander';
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

/** Who did it, for the reasons an operator's actions leave behind. */
export function operatorName(): string {
  const user = process.env.USER ?? process.env.LOGNAME ?? 'unknown';
  return `${user} (stampeded CLI)`;
}
