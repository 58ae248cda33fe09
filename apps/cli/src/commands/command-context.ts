import type { Command } from 'commander';
import { userInfo } from 'node:os';
import { connect, type CliConnection } from '../connection/cli-connection.js';
import type { CliIo } from '../output/output.js';
import { PROGRAM_WITHOUT_IO } from '../cli.messages.js';

export interface GlobalOptions {
  url?: string;
  schema: string;
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
  return { ...(command.optsWithGlobals() as Omit<GlobalOptions, 'io'>), io };
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
