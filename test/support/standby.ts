/**
 * A PostgreSQL 18 primary and its streaming standby, from the binaries the
 * tests already run on (test/support/postgres-major.mjs), for the specs that
 * fail a primary over or read from a replica.
 *
 *   const primary = await startPrimary();
 *   const standby = await startStandby(primary, { synchronous: true });
 *   // ... write on primary.url, read on standby.url (read-only until promoted)
 *   await standby.caughtUp();          // everything the primary wrote so far is replayed
 *   await standby.lagBytes();          // WAL bytes the standby has yet to replay (asks the primary)
 *   await standby.lagSeconds();        // age of the newest transaction not yet replayed (asks the standby)
 *   await standby.pauseStreaming();    // async only: the primary's next commits are not replicated
 *   await primary.kill('SIGKILL');     // a crash of the postmaster: no shutdown checkpoint
 *   await standby.promote();           // standby.url now takes writes
 *   await standby.stop(); await primary.stop();   // in afterAll; each also removes its data folder
 *
 * The primary is a server of the test's own, never the run's shared one: a
 * failover test kills it. It keeps fsync off (a killed process loses nothing
 * the kernel holds) but commits locally, and, with a synchronous standby,
 * waits for that standby's flush before a COMMIT returns: what a user with
 * `synchronous_commit = on` gets.
 *
 * The standby is made the low-level way (PostgreSQL has no pg_basebackup in
 * the embedded binaries): a physical replication slot on the primary, so it
 * keeps the WAL the standby has yet to read; pg_backup_start(), a copy of the
 * data folder, pg_backup_stop() and its label written as backup_label; then
 * standby.signal, primary_conninfo and primary_slot_name. `synchronous` adds
 * the standby to the primary's synchronous_standby_names and waits until the
 * primary reports it as sync.
 *
 * As root the servers run as the postgres user (postgres-major.mjs): the
 * copy is chowned to it. The URLs name the `postgres` database; `at()` gives
 * another one (CREATE DATABASE on the primary reaches the standby too).
 */
import { appendFile, chmod, chown, copyFile, lstat, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { startPostgresMajor, type StartedPostgresMajor } from './postgres-major.mjs';

export interface StartedPrimary extends StartedPostgresMajor {
  /** A URL of this server naming `database`. */
  at(database: string): string;
}

export interface StandbyOptions {
  /** Commits on the primary wait for this standby's flush (synchronous_standby_names). Default false. */
  synchronous?: boolean;
  /** Its application_name, the name synchronous_standby_names lists; also its slot's name. Default 'standby1'. */
  name?: string;
  /** Extra `-c` settings for the standby. */
  settings?: Record<string, string | number>;
}

export interface Standby {
  readonly name: string;
  readonly url: string;
  readonly port: number;
  readonly data: string;
  readonly synchronous: boolean;
  /** A URL of the standby naming `database`. */
  at(database: string): string;
  /** Resolves once the standby has replayed everything the primary had written when called. Needs the primary up. */
  caughtUp(timeoutMs?: number): Promise<void>;
  /** WAL bytes between the primary's current position and the standby's replay: asks the primary, which must be up. */
  lagBytes(): Promise<number>;
  /** Seconds since the newest transaction the standby replayed, 0 when it has replayed all it received: asks the standby. */
  lagSeconds(): Promise<number>;
  /**
   * Stops streaming (an asynchronous standby only: a synchronous one would
   * hold every commit): what the primary commits from now on stays on the
   * primary alone, as the newest commits do when a primary dies ahead of its
   * standby. Resolves once the standby's WAL receiver has stopped.
   */
  pauseStreaming(): Promise<void>;
  /** Streams again from where it stopped. */
  resumeStreaming(): Promise<void>;
  /** Ends recovery: the standby becomes a primary that takes writes. Resolves once it does. */
  promote(): Promise<void>;
  /** Sends the postmaster `signal` and resolves once it has exited. */
  kill(signal: NodeJS.Signals): Promise<void>;
  /** Stops the server and removes its data folder. */
  stop(): Promise<void>;
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end().catch(() => {});
  }
}

async function poll(check: () => Promise<boolean>, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Starts a PostgreSQL 18 server of the test's own, ready to stream to standbys. */
export async function startPrimary(options: { maxConnections?: number; settings?: Record<string, string | number> } = {}): Promise<StartedPrimary> {
  const server = await startPostgresMajor(18, {
    durable: false,
    maxConnections: options.maxConnections ?? 200,
    settings: { synchronous_commit: 'on', wal_level: 'replica', max_wal_senders: 10, max_replication_slots: 10, ...options.settings },
  });
  return { ...server, at: (database) => withDatabase(server.url, database) };
}

// What a base backup leaves out (the PostgreSQL docs, "Making a Base Backup
// Using the Low Level API"): the running server's pid and sockets, its WAL
// (the standby streams it from the slot), and folders whose contents are
// reset at start. The folders themselves must exist.
const SKIP_FILES = new Set(['postmaster.pid', 'postmaster.opts', 'backup_label', 'tablespace_map', 'standby.signal', 'recovery.signal']);
const EMPTY_FOLDERS = new Set(['pg_wal', 'pg_replslot', 'pg_dynshmem', 'pg_notify', 'pg_serial', 'pg_snapshots', 'pg_stat_tmp', 'pg_subtrans']);

/**
 * Copies a live data folder. Files may vanish while it runs (temporary files,
 * a dropped relation): the backup's WAL replay makes up for what the copy
 * saw half-written or missed.
 */
async function copyDataFolder(from: string, to: string, owner: { uid: number; gid: number } | undefined, top = true): Promise<void> {
  await mkdir(to, { mode: 0o700 });
  await chmod(to, 0o700);
  if (owner) await chown(to, owner.uid, owner.gid);
  let entries;
  try {
    entries = await readdir(from, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  for (const entry of entries) {
    const source = join(from, entry.name);
    const target = join(to, entry.name);
    if (top && SKIP_FILES.has(entry.name)) continue;
    if (entry.name.startsWith('.s.PGSQL.') || entry.name.startsWith('pgsql_tmp')) continue;
    if (entry.isDirectory()) {
      if (top && EMPTY_FOLDERS.has(entry.name)) {
        await mkdir(target, { mode: 0o700 });
        if (owner) await chown(target, owner.uid, owner.gid);
        if (entry.name === 'pg_wal') {
          await mkdir(join(target, 'archive_status'), { mode: 0o700 });
          if (owner) await chown(join(target, 'archive_status'), owner.uid, owner.gid);
        }
        continue;
      }
      await copyDataFolder(source, target, owner, false);
    } else if (entry.isFile()) {
      try {
        await copyFile(source, target);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw err;
      }
      await chmod(target, 0o600);
      if (owner) await chown(target, owner.uid, owner.gid);
    }
  }
}

/** Makes a base backup of `primary` and starts it as a streaming standby. */
export async function startStandby(primary: StartedPrimary, options: StandbyOptions = {}): Promise<Standby> {
  const name = options.name ?? 'standby1';
  const synchronous = options.synchronous ?? false;
  const root = await mkdtemp(join(tmpdir(), `stampeded-standby-`));
  await chmod(root, 0o755);
  const data = join(root, 'data');
  const stat = await lstat(primary.data);
  const owner = process.getuid?.() === 0 ? { uid: stat.uid, gid: stat.gid } : undefined;

  const conninfo = `host=127.0.0.1 port=${primary.port} user=postgres application_name=${name}`;
  await withClient(primary.url, async (client) => {
    // Reserved now, so the primary keeps every WAL segment from before the backup's start.
    await client.query('SELECT pg_create_physical_replication_slot($1, true)', [name]);
    // The backup session must stay open from start to stop.
    await client.query('SELECT pg_backup_start($1, true)', [name]);
    await copyDataFolder(primary.data, data, owner);
    const { rows } = await client.query<{ labelfile: string; spcmapfile: string | null }>('SELECT labelfile, spcmapfile FROM pg_backup_stop(false)');
    const write = async (file: string, text: string) => {
      await writeFile(join(data, file), text, { mode: 0o600 });
      if (owner) await chown(join(data, file), owner.uid, owner.gid);
    };
    await write('backup_label', rows[0].labelfile);
    if (rows[0].spcmapfile) await write('tablespace_map', rows[0].spcmapfile);
    await write('standby.signal', '');
    // In the configuration file, not on the command line, so that pauseStreaming() can change it.
    await appendFile(join(data, 'postgresql.auto.conf'), `primary_conninfo = '${conninfo}'\nprimary_slot_name = '${name}'\n`);
  });

  const server = await startPostgresMajor(18, {
    durable: false,
    dataDir: data,
    maxConnections: 200,
    settings: {
      hot_standby: 'on',
      // Streams again soon after pauseStreaming() or a lost connection, not 5 s later.
      wal_retrieve_retry_interval: '200ms',
      // The copy carries the primary's postgresql.auto.conf: once promoted,
      // this server must not wait for a standby of its own.
      synchronous_standby_names: '',
      synchronous_commit: 'on',
      max_wal_senders: 10,
      max_replication_slots: 10,
      ...options.settings,
    },
  });

  const streaming = () =>
    withClient(primary.url, async (c) => {
      const { rows } = await c.query<{ state: string; sync_state: string }>('SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1', [
        name,
      ]);
      return rows[0]?.state === 'streaming' && (!synchronous || rows[0].sync_state === 'sync');
    });
  try {
    if (synchronous) {
      await withClient(primary.url, async (c) => {
        await c.query(`ALTER SYSTEM SET synchronous_standby_names = '"${name.replace(/[^A-Za-z0-9_]/g, '')}"'`);
        await c.query('SELECT pg_reload_conf()');
      });
    }
    await poll(streaming, `standby ${name} to stream${synchronous ? ' synchronously' : ''}`, 30_000);
  } catch (err) {
    await server.stop();
    await rm(root, { recursive: true, force: true });
    throw err;
  }

  let stopped: Promise<void> | undefined;
  const standby: Standby = {
    name,
    url: server.url,
    port: server.port,
    data,
    synchronous,
    at: (database) => withDatabase(server.url, database),
    caughtUp: async (timeoutMs = 30_000) => {
      const target = await withClient(primary.url, async (c) => (await c.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0].lsn);
      await poll(
        () =>
          withClient(server.url, async (c) => {
            const { rows } = await c.query<{ done: boolean }>('SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS done', [target]);
            return rows[0].done === true;
          }),
        `standby ${name} to replay up to ${target}`,
        timeoutMs,
      );
    },
    lagBytes: () =>
      withClient(primary.url, async (c) => {
        const { rows } = await c.query<{ lag: string | null }>(
          'SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::text AS lag FROM pg_stat_replication WHERE application_name = $1',
          [name],
        );
        if (!rows[0] || rows[0].lag === null) throw new Error(`standby ${name} is not connected to the primary`);
        return Number(rows[0].lag);
      }),
    lagSeconds: () =>
      withClient(server.url, async (c) => {
        const { rows } = await c.query<{ lag: number }>(
          `SELECT CASE WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn() THEN 0
                       ELSE coalesce(extract(epoch FROM now() - pg_last_xact_replay_timestamp()), 0) END::float8 AS lag`,
        );
        return rows[0].lag;
      }),
    pauseStreaming: async () => {
      if (synchronous) throw new Error(`standby ${name} is synchronous: pausing it would hold every commit on the primary`);
      await withClient(server.url, async (c) => {
        await c.query(`ALTER SYSTEM SET primary_conninfo = ''`);
        await c.query('SELECT pg_reload_conf()');
      });
      await poll(
        () => withClient(server.url, async (c) => (await c.query('SELECT 1 FROM pg_stat_wal_receiver')).rowCount === 0),
        `standby ${name} to stop streaming`,
        30_000,
      );
    },
    resumeStreaming: async () => {
      await withClient(server.url, async (c) => {
        await c.query(`ALTER SYSTEM SET primary_conninfo = '${conninfo}'`);
        await c.query('SELECT pg_reload_conf()');
      });
    },
    promote: async () => {
      await withClient(server.url, async (c) => {
        const { rows } = await c.query<{ promoted: boolean }>('SELECT pg_promote(true, 60) AS promoted');
        if (!rows[0].promoted) throw new Error(`standby ${name} did not finish its promotion within 60 s`);
      });
    },
    kill: (signal) => server.kill(signal),
    stop: () =>
      (stopped ??= (async () => {
        await server.stop();
        await rm(root, { recursive: true, force: true });
      })()),
  };
  return standby;
}
