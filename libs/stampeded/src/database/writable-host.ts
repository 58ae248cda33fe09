import pg from 'pg';
import type { ClientConfig } from 'pg';
import { SESSION_READ_ONLY } from '../sql/connection.sql.js';
import { NO_WRITABLE_HOST } from '../stampeded.messages.js';

/** One of the hosts given to writableHostClient(). */
interface Host {
  host: string;
  port: number;
}

type ConnectCallback = ((err: Error) => void) | ((err: null, c: pg.Client) => void);

/** How long a probe waits for a host that neither answers nor refuses, unless the config sets connectionTimeoutMillis. */
const PROBE_TIMEOUT_MS = 5000;

function parseHost(entry: string): Host {
  const m = /^(?:\[([^\]]+)\]|([^:]+))(?::(\d+))?$/.exec(entry.trim());
  if (!m) throw new TypeError(`"${entry}" is not a host or host:port`);
  return { host: m[1] ?? m[2], port: m[3] ? Number(m[3]) : 5432 };
}

/** The unit of the 08 class, so that every retry loop that waits for the database (isConnectionError) waits for this too. */
class NoWritableHostError extends Error {
  readonly code = '08001';
}

/**
 * A node-postgres Client class that connects to the first of `hosts` taking
 * writes, as libpq does with several hosts and `target_session_attrs=read-write`,
 * which node-postgres does not support. Given as the `Client` of a pool's
 * config (TypeORM's `extra`, or Stampeded's `connection`), every new
 * connection -- the app's, Stampeded's pool, its LISTEN and leader
 * connections -- goes to the writable one: after a failover, to the promoted
 * standby, and never to a server still in recovery.
 *
 * Each connect first probes the hosts, the last writable one first, on a
 * short connection of its own (SESSION_READ_ONLY), then connects there: a
 * second connection per connect, which a pool pays only when it opens one.
 * While no host takes writes (the primary is gone and the standby not yet
 * promoted) the connect fails with SQLSTATE 08001, a connection error that
 * Stampeded's outcomes and claims wait out.
 */
export function writableHostClient(hosts: readonly string[]): typeof pg.Client {
  if (!hosts.length) throw new TypeError('writableHostClient() needs at least one host');
  const candidates = hosts.map(parseHost);
  let lastWritable = 0;

  async function findWritable(config: ClientConfig): Promise<Host> {
    const order = [...candidates.slice(lastWritable), ...candidates.slice(0, lastWritable)];
    const reasons: string[] = [];
    for (const candidate of order) {
      const probe = new pg.Client({
        ...config,
        connectionTimeoutMillis: config.connectionTimeoutMillis || PROBE_TIMEOUT_MS,
        application_name: 'stampeded-probe',
      });
      // A connection string's host overrides the config's: set on the instance, where connect() reads it.
      Object.assign(probe, candidate);
      probe.on('error', () => {});
      try {
        await probe.connect();
        const { rows } = await probe.query<{ read_only: boolean }>(SESSION_READ_ONLY.text);
        if (!rows[0].read_only) {
          lastWritable = candidates.indexOf(candidate);
          return candidate;
        }
        reasons.push(`${candidate.host}:${candidate.port} is read-only`);
      } catch (err) {
        reasons.push(`${candidate.host}:${candidate.port}: ${(err as Error).message}`);
      } finally {
        await probe.end().catch(() => {});
      }
    }
    throw new NoWritableHostError(NO_WRITABLE_HOST(reasons));
  }

  return class WritableHostClient extends pg.Client {
    private readonly settings: ClientConfig;

    constructor(config?: string | ClientConfig) {
      super(config);
      this.settings = typeof config === 'string' ? { connectionString: config } : { ...config };
    }

    override connect(): Promise<pg.Client>;
    override connect(callback: ConnectCallback): void;
    override connect(callback?: ConnectCallback): Promise<pg.Client> | void {
      const connected = findWritable(this.settings).then((found) => {
        Object.assign(this, found);
        return super.connect();
      });
      if (!callback) return connected;
      connected.then(
        () => (callback as (err: null, c: pg.Client) => void)(null, this),
        (err: Error) => (callback as (err: Error) => void)(err),
      );
    }
  };
}
