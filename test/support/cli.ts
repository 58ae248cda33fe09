import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { runCli } from '../../apps/cli/src/cli.run.js';

const CLI = fileURLToPath(new URL('../../apps/cli/dist/main.js', import.meta.url));

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  /** stdout parsed, for --json runs. */
  json<T = any>(): T;
}

/**
 * Runs the built `stampeded` binary as a user would, with DATABASE_URL set to
 * `url` unless `env` says otherwise: for what only a real process shows
 * (exit codes, start-up, one-line errors).
 */
export function spawnCli(url: string | undefined, args: string[], env: Record<string, string | undefined> = {}): Promise<CliRun> {
  const childEnv: Record<string, string | undefined> = { ...process.env, DATABASE_URL: url, NODE_OPTIONS: '', ...env };
  for (const key of Object.keys(childEnv)) if (childEnv[key] === undefined) delete childEnv[key];
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: childEnv as NodeJS.ProcessEnv, timeout: 30_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, stdout, stderr, json: () => JSON.parse(stdout) });
    });
  });
}

/**
 * The same CLI run in this process, with its output captured: what the
 * binary runs, less a Node start-up per command, which on a busy two-core CI
 * machine is a second or two each.
 */
export async function cli(url: string | undefined, args: string[], env: Record<string, string | undefined> = {}): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(args, {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    env: { USER: process.env.USER, DATABASE_URL: url, ...env },
  });
  return { code, stdout, stderr, json: () => JSON.parse(stdout) };
}
