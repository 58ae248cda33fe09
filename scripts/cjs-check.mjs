// Proves the packed packages in a CommonJS Nest app, on Nest 11 and Nest 12.
// Packs @stampeded/nestjs, @stampeded/testing and @stampeded/dashboard, then
// for each app in test/fixtures/cjs-app (nest11: Nest 11 on TypeORM 0.3;
// nest12: Nest 12 on TypeORM 1; neither has "type": "module") installs the
// tarballs and the app's pinned registry packages from the app's own
// committed lockfile with `npm ci`, checks with `npm ls` that the packages'
// peer ranges accept what the app has, compiles src/main.ts with tsc to
// require() calls (and type-checks it once more under the older `node10`
// resolution), and runs it: it requires every entry point of the three
// packages, enqueues in a TypeORM transaction, lets the worker run the job,
// and reads it back through the dashboard's JSON API. The Nest 11 app then
// runs its own jest test (test/fixtures/cjs-app/test) in Jest's ESM mode.
//
//   node scripts/cjs-check.mjs [11] [12] [--no-build] [--update-lock]
//
// With DATABASE_URL set the apps use that database (the jest spec
// test/packaging/cjs-apps.e2e-spec.ts gives each a fresh one on the test
// server) and the embedded PostgreSQL binaries are not installed; without
// it each app starts the embedded PostgreSQL of @stampeded/testing.
// --update-lock re-resolves an app with `npm install` and writes its
// lockfile back: run it after changing a fixture's package.json or a
// package's own dependencies. The tarballs' entries in a lockfile carry no
// integrity, so `npm ci` always reads the tarballs just packed rather than a
// cached copy of an earlier pack.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const fixture = join(root, 'test/fixtures/cjs-app');
const PACKAGES = { nestjs: 'libs/stampeded', testing: 'libs/testing', dashboard: 'libs/dashboard' };

const args = process.argv.slice(2);
const unknown = args.filter((a) => !['11', '12', '--no-build', '--update-lock'].includes(a));
if (unknown.length) {
  console.error(`cjs-check: unknown argument(s) ${unknown.join(' ')}; usage: node scripts/cjs-check.mjs [11] [12] [--no-build] [--update-lock]`);
  process.exit(2);
}
const majors = args.filter((a) => /^\d+$/.test(a));
const apps = (majors.length ? majors : ['11', '12']).map((m) => `nest${m}`);
const build = !args.includes('--no-build');
const updateLock = args.includes('--update-lock');
const useDatabaseUrl = Boolean(process.env.DATABASE_URL);

const step = (what) => console.log(`cjs-check: ${what}`);
// The app's npm and node see neither this process's npm settings (an
// enclosing `npm test` sets npm_config_*) nor jest's NODE_OPTIONS.
const cleanEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('npm_') && k !== 'NODE_OPTIONS'));

function run(cmd, cmdArgs, cwd, stdio = 'inherit') {
  const r = spawnSync(cmd, cmdArgs, { cwd, env: cleanEnv, stdio });
  if (r.status !== 0) throw new Error(`${cmd} ${cmdArgs.join(' ')} failed with ${r.status ?? r.signal}`);
}

/** Runs the app, echoing its output, and resolves with what it printed on stdout. */
function runApp(cwd) {
  return new Promise((resolveRun, reject) => {
    const child = spawn(process.execPath, ['dist/main.js'], { cwd, env: cleanEnv, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      process.stdout.write(chunk);
    });
    child.on('error', reject);
    child.on('close', (code, signal) => (code === 0 ? resolveRun(out) : reject(new Error(`the app exited with ${code ?? signal}`))));
  });
}

/** Entries installed from a local tarball keep no integrity, so npm reads the tarball rather than its cache. */
function withoutTarballIntegrity(lock) {
  for (const entry of Object.values(lock.packages ?? {})) {
    if (typeof entry.resolved === 'string' && entry.resolved.startsWith('file:')) delete entry.integrity;
  }
  return lock;
}

const work = mkdtempSync(join(tmpdir(), 'stampeded-cjs-'));
// The embedded server runs as the postgres user, which must reach the binaries installed below.
chmodSync(work, 0o755);
try {
  if (build) {
    step('building');
    run('npm', ['run', 'build', '--silent'], root);
  }
  step('packing');
  const packs = join(work, 'packs');
  mkdirSync(packs);
  const workspaces = Object.values(PACKAGES).flatMap((w) => ['--workspace', w]);
  run('npm', ['pack', '--silent', ...workspaces, '--pack-destination', packs], root);
  // The fixtures name the tarballs without a version, so a release does not change them.
  for (const [short, dir] of Object.entries(PACKAGES)) {
    const { version } = JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8'));
    renameSync(join(packs, `stampeded-${short}-${version}.tgz`), join(packs, `stampeded-${short}.tgz`));
  }

  for (const name of apps) {
    const app = join(work, name);
    const source = join(fixture, name);
    mkdirSync(app);
    const manifest = JSON.parse(readFileSync(join(source, 'package.json'), 'utf8'));
    if ('type' in manifest) throw new Error(`${source}/package.json sets "type"; the app must be CommonJS`);
    copyFileSync(join(source, 'package.json'), join(app, 'package.json'));
    cpSync(join(fixture, 'src'), join(app, 'src'), { recursive: true });
    for (const f of ['tsconfig.json', 'tsconfig.node10.json']) copyFileSync(join(fixture, f), join(app, f));
    // An app with Jest among its packages runs its own test too, the way docs/testing.md says.
    const withJest = Boolean(manifest.devDependencies?.jest);
    if (withJest) {
      cpSync(join(fixture, 'test'), join(app, 'test'), { recursive: true });
      copyFileSync(join(fixture, 'jest.config.js'), join(app, 'jest.config.js'));
    }

    const lockPath = join(source, 'package-lock.json');
    if (updateLock) {
      // Starting from the committed lockfile keeps what still fits as it was.
      if (existsSync(lockPath)) writeFileSync(join(app, 'package-lock.json'), readFileSync(lockPath));
      step(`${name}: resolving with npm install`);
      run('npm', ['install', '--no-audit', '--no-fund'], app);
      const lock = withoutTarballIntegrity(JSON.parse(readFileSync(join(app, 'package-lock.json'), 'utf8')));
      writeFileSync(lockPath, `${JSON.stringify(lock, null, 2)}\n`);
      step(`${name}: wrote ${join('test/fixtures/cjs-app', name, 'package-lock.json')}`);
    } else {
      const lock = withoutTarballIntegrity(JSON.parse(readFileSync(lockPath, 'utf8')));
      writeFileSync(join(app, 'package-lock.json'), JSON.stringify(lock, null, 2));
      step(`${name}: npm ci from its lockfile${useDatabaseUrl ? ' (no embedded PostgreSQL binaries: DATABASE_URL is set)' : ''}`);
      run('npm', ['ci', '--no-audit', '--no-fund', ...(useDatabaseUrl ? ['--omit=optional'] : [])], app);
    }

    // npm ci installs what the lockfile says without judging peer ranges;
    // npm ls fails on any the packed packages' peers do not accept, and on a
    // dependency of theirs the lockfile lacks. Without npm's hidden lockfile
    // it reads the installed package.json files, which are the tarballs',
    // rather than the committed lockfile's record of them.
    step(`${name}: every peer range accepts the installed version (npm ls)`);
    rmSync(join(app, 'node_modules/.package-lock.json'), { force: true });
    run('npm', ['ls', '--all'], app, ['ignore', 'ignore', 'inherit']);

    const tsc = join(app, 'node_modules/typescript/bin/tsc');
    step(`${name}: compiling to CommonJS (module nodenext), and type-checking with module commonjs / node10 resolution`);
    run(process.execPath, [tsc, '-p', 'tsconfig.json'], app);
    run(process.execPath, [tsc, '-p', 'tsconfig.node10.json'], app);
    const compiled = readFileSync(join(app, 'dist/main.js'), 'utf8');
    for (const pkg of ['@stampeded/nestjs', '@stampeded/dashboard', '@stampeded/testing']) {
      if (!compiled.includes(`require("${pkg}")`)) throw new Error(`dist/main.js does not require("${pkg}"): it was not compiled to CommonJS`);
    }

    step(`${name}: running the app`);
    const out = await runApp(app);
    const line = out.split('\n').find((l) => l.startsWith('cjs-app: '));
    if (!line) throw new Error(`${name} printed no cjs-app line`);
    const seen = JSON.parse(line.slice('cjs-app: '.length));
    const major = name.replace('nest', '');
    if (seen.nest.split('.')[0] !== major) throw new Error(`${name} ran on Nest ${seen.nest}, not ${major}`);
    if (withJest) {
      step(`${name}: running the app's own jest test in Jest's ESM mode`);
      const r = spawnSync(process.execPath, ['node_modules/jest/bin/jest.js', '--ci'], {
        cwd: app,
        env: { ...cleanEnv, NODE_OPTIONS: '--experimental-vm-modules' },
        stdio: 'inherit',
      });
      if (r.status !== 0) throw new Error(`${name}: its jest test failed with ${r.status ?? r.signal}`);
      step(`${name}: its jest test passed`);
    }
    step(`${name}: OK on Nest ${seen.nest}, TypeORM ${seen.typeorm}, Node ${seen.node}`);
  }
  step('OK');
} finally {
  rmSync(work, { recursive: true, force: true });
}
