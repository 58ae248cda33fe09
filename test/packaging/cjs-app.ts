import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import type { TestDatabase } from '@stampeded/testing';
import { sqlClient, testDatabase } from '../support/test-app.js';

const SCRIPT = fileURLToPath(new URL('../../scripts/cjs-check.mjs', import.meta.url));
/** npm ci from the registry, two compiles and the app: minutes on a busy two-core machine. */
const RUN_TIMEOUT_MS = 10 * 60_000;

/** What the CommonJS app printed about its run (test/fixtures/cjs-app/src/main.ts). */
export interface CjsAppRun {
  nest: string;
  typeorm: string;
  node: string;
  entryPoints: string[];
  job: { state: string; result: unknown; attempt: number };
  rolledBackJobStored: boolean;
  dashboard: { status: number; state?: string };
}

/**
 * Runs scripts/cjs-check.mjs for one Nest major against `databaseUrl`: it
 * packs the built packages, installs them into the fixture app from its
 * lockfile, compiles the app to CommonJS and runs it. Resolves with the exit
 * code, the whole output, and the app's own report when it printed one.
 */
export function runCjsCheck(major: 11 | 12, databaseUrl: string, timeoutMs: number): Promise<{ code: number | null; output: string; run?: CjsAppRun }> {
  return new Promise((resolve, reject) => {
    const env: Record<string, string | undefined> = { ...process.env, DATABASE_URL: databaseUrl, NODE_OPTIONS: '' };
    const child = spawn(process.execPath, [SCRIPT, String(major), '--no-build'], { env: env as NodeJS.ProcessEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    const timer = setTimeout(() => child.kill('SIGTERM'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      const line = output.split('\n').find((l) => l.startsWith('cjs-app: '));
      resolve({ code, output, run: line ? (JSON.parse(line.slice('cjs-app: '.length)) as CjsAppRun) : undefined });
    });
  });
}

/**
 * The test of one Nest major: the app's run succeeds, and the database it
 * used holds what it reported: the job it enqueued in a committed
 * transaction, completed by the worker, and nothing from the transaction it
 * rolled back. `withJest`: the app also ran its own jest test, whose job is
 * stored too.
 */
export function describeCjsApp(major: 11 | 12, typeorm: RegExp, withJest: boolean): void {
  describe(`a CommonJS app on Nest ${major} with the packed packages`, () => {
    let db: TestDatabase;
    let sql: pg.Client | undefined;

    beforeAll(async () => {
      db = await testDatabase();
    });

    afterAll(async () => {
      await sql?.end();
      await db?.drop();
    });

    it(
      'requires every entry point, enqueues in a TypeORM transaction, runs the job and shows it on the dashboard',
      async () => {
        const { code, output, run } = await runCjsCheck(major, db.url, RUN_TIMEOUT_MS - 30_000);
        if (code !== 0 || !run) throw new Error(`scripts/cjs-check.mjs ${major} exited with ${code}:\n${output.slice(-6000)}`);

        expect(run.nest.split('.')[0]).toBe(String(major));
        expect(run.typeorm).toMatch(typeorm);
        expect(run.entryPoints).toEqual([
          '@stampeded/nestjs',
          '@stampeded/nestjs/internal',
          '@stampeded/nestjs/internal-runtime',
          '@stampeded/testing',
          '@stampeded/dashboard',
          '@stampeded/dashboard/inspector',
          '@stampeded/dashboard/internal',
        ]);
        expect(run.job).toEqual({ state: 'completed', result: 'hello cjs (attempt 1)', attempt: 1 });
        expect(run.rolledBackJobStored).toBe(false);
        expect(run.dashboard).toEqual({ status: 200, state: 'completed' });

        sql = await sqlClient(db.url);
        const { rows } = await sql.query(`SELECT queue, task, state::text, args, attempt FROM stampeded_jobs ORDER BY queue`);
        const ranByJest = { queue: 'cjs-jest', task: 'greet-in-jest', state: 'completed', args: { name: 'jest' }, attempt: 1 };
        expect(rows).toEqual([{ queue: 'cjs', task: 'greet', state: 'completed', args: { name: 'cjs' }, attempt: 1 }, ...(withJest ? [ranByJest] : [])]);
        if (withJest) expect(output).toContain(`cjs-check: nest${major}: its jest test passed`);
      },
      RUN_TIMEOUT_MS,
    );
  });
}
