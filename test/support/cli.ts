import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../../apps/cli/dist/main.js', import.meta.url));

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  /** stdout parsed, for --json runs. */
  json<T = any>(): T;
}

/** Runs the built `stampeded` CLI as a user would, with DATABASE_URL set to `url` unless `env` says otherwise. */
export function runCli(url: string | undefined, args: string[], env: Record<string, string | undefined> = {}): Promise<CliRun> {
  const childEnv: Record<string, string | undefined> = { ...process.env, DATABASE_URL: url, NODE_OPTIONS: '', ...env };
  for (const key of Object.keys(childEnv)) if (childEnv[key] === undefined) delete childEnv[key];
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: childEnv as NodeJS.ProcessEnv, timeout: 30_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, stdout, stderr, json: () => JSON.parse(stdout) });
    });
  });
}
