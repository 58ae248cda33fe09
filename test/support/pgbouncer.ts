import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

/**
 * PgBouncer (Debian's package) in transaction mode in front of the test
 * PostgreSQL, for the pooler suite: a config in a temp folder, every
 * database of the server forwarded (`*`), clients trusted, the server
 * logged into with the test server's own credentials. PgBouncer refuses to
 * run as root: as root it runs as the postgres user.
 */
export interface StartedPgBouncer {
  /** `databaseUrl` with its host and port replaced by PgBouncer's. */
  through(databaseUrl: string): string;
  /** What PgBouncer wrote: its errors, for a failing test's message. */
  readonly output: string;
  /** As a crash would end it, or a clean stop. */
  stop(): Promise<void>;
}

/** Where the pgbouncer binary is, or undefined when it is not installed (/usr/sbin is not on every PATH). */
export function findPgBouncer(): string | undefined {
  const found = spawnSync('sh', ['-c', 'command -v pgbouncer'], { encoding: 'utf8' }).stdout.trim();
  if (found) return found;
  return ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer', '/usr/local/bin/pgbouncer'].find((p) => existsSync(p));
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

function ids(user: string): { uid: number; gid: number } | undefined {
  const uid = Number(spawnSync('id', ['-u', user], { encoding: 'utf8' }).stdout.trim());
  const gid = Number(spawnSync('id', ['-g', user], { encoding: 'utf8' }).stdout.trim());
  return Number.isInteger(uid) && Number.isInteger(gid) && uid > 0 ? { uid, gid } : undefined;
}

/** An ini value, quoted for PgBouncer's connection strings. */
function quoted(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

export async function startPgBouncer(serverUrl: string, binary = findPgBouncer()): Promise<StartedPgBouncer> {
  if (!binary) throw new Error('pgbouncer is not installed (apt-get install -y pgbouncer)');
  const server = new URL(serverUrl);
  const user = decodeURIComponent(server.username || 'postgres');
  const password = decodeURIComponent(server.password);
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'stampeded-pgbouncer-'));
  chmodSync(dir, 0o755);
  const serverHost = server.hostname === 'localhost' ? '127.0.0.1' : server.hostname.replace(/^\[|\]$/g, '');
  const forward = [`host=${serverHost}`, `port=${server.port || 5432}`, `user=${quoted(user)}`, ...(password ? [`password=${quoted(password)}`] : [])];
  const config = [
    '[databases]',
    `* = ${forward.join(' ')}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    "unix_socket_dir = ''",
    'pool_mode = transaction',
    'auth_type = trust',
    `auth_file = ${join(dir, 'userlist.txt')}`,
    'max_client_conn = 1000',
    'default_pool_size = 20',
    'max_db_connections = 60',
    'log_connections = 0',
    'log_disconnections = 0',
    '',
  ].join('\n');
  writeFileSync(join(dir, 'pgbouncer.ini'), config, { mode: 0o644 });
  writeFileSync(join(dir, 'userlist.txt'), `"${user}" ""\n`, { mode: 0o644 });

  const asRoot = process.getuid?.() === 0;
  const runAs = asRoot ? ids('postgres') : undefined;
  if (asRoot && !runAs) throw new Error('pgbouncer refuses to run as root, and there is no postgres user to run it as');
  const child: ChildProcess = spawn(binary, [join(dir, 'pgbouncer.ini')], {
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(runAs ? { uid: runAs.uid, gid: runAs.gid } : {}),
  });
  let output = '';
  const keep = (chunk: Buffer) => (output = (output + chunk.toString('utf8')).slice(-20_000));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));

  const through = (databaseUrl: string) => {
    const url = new URL(databaseUrl);
    url.hostname = '127.0.0.1';
    url.port = String(port);
    return url.toString();
  };

  // Ready once it answers a query on the server's own database.
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`pgbouncer exited at start (code ${child.exitCode}):\n${output}`);
    const client = new pg.Client({ connectionString: through(serverUrl) });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.query('SELECT 1');
      await client.end();
      break;
    } catch (err) {
      await client.end().catch(() => {});
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`pgbouncer did not answer within 15 s: ${(err as Error).message}\n${output}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  return {
    through,
    get output() {
      return output;
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
