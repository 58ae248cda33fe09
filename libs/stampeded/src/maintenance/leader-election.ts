import type pg from 'pg';
import type { StampededDatabase } from '../database/stampeded-database.js';
import { LEADER_PING, RELEASE_LEADER_LOCK, TRY_LEADER_LOCK } from '../sql/maintenance.sql.js';
import type { Statement } from '../sql/statement.js';
import { LeaderLoop, type LeaderElectionHandlers } from './leader-loop.js';
import { LEADER_CHECK_NO_ANSWER } from '../stampeded.messages.js';

/**
 * One maintenance leader per schema, by a session advisory lock held on a
 * connection of the leader's own.
 *
 * Why a lock and not a lease row: the lock lives exactly as long as the
 * session, so a leader that dies -- SIGKILL, OOM, a crashed host whose
 * socket the server sees close -- gives up leadership the moment the server
 * ends its session, with no lease to wait out and no clock to agree on. A
 * lease row needs a TTL (a dead leader blocks maintenance until it runs
 * out), renewals (writes every few seconds, forever) and clocks that agree.
 * The price is a dedicated connection per process and a session-pinned
 * connection: it cannot go through a transaction-mode pooler, where
 * LeaderLease (leader-lease.ts) stands in for it.
 *
 * Every process keeps trying every `intervalMs`, so a new leader takes over
 * within one interval of the old one's session ending. The leader pings its
 * connection on the same beat: if the ping fails, it steps down at once, as
 * the server will have released the lock with the session.
 */
export class LeaderElection extends LeaderLoop {
  private client?: pg.Client;
  private leading = false;

  constructor(
    private readonly db: StampededDatabase,
    intervalMs: number,
    private readonly handlers: LeaderElectionHandlers,
  ) {
    super(intervalMs);
  }

  get isLeader(): boolean {
    return this.leading;
  }

  protected async checkOnce(): Promise<void> {
    let client: pg.Client | undefined;
    try {
      client = await this.connection();
      if (this.leading) {
        await this.query(client, LEADER_PING, []);
      } else {
        const [{ acquired }] = await this.query<{ acquired: boolean }>(client, TRY_LEADER_LOCK, [this.db.schema]);
        if (acquired && !this.stopped) {
          this.leading = true;
          this.handlers.onElected();
        } else if (acquired) {
          await this.query(client, RELEASE_LEADER_LOCK, [this.db.schema]);
        }
      }
    } catch (err) {
      if (client) this.drop(client, `leader connection failed: ${(err as Error).message}`);
    }
  }

  /** A ping that hangs (a half-open connection) counts as a failed one. */
  private async query<Row>(client: pg.Client, statement: Statement, values: unknown[]): Promise<Row[]> {
    const bound = this.db.statement(statement);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      const limitMs = Math.max(this.intervalMs * 2, 5000);
      timer = setTimeout(() => reject(new Error(LEADER_CHECK_NO_ANSWER(limitMs))), limitMs);
    });
    try {
      const result = await Promise.race([client.query({ name: bound.name, text: bound.text, values }), timeout]);
      return result.rows as Row[];
    } finally {
      clearTimeout(timer);
    }
  }

  private async connection(): Promise<pg.Client> {
    if (this.client) return this.client;
    const client = this.db.newClient();
    client.on('error', (err) => this.drop(client, `leader connection lost: ${err.message}`));
    client.on('end', () => this.drop(client, 'leader connection ended'));
    this.client = client;
    await client.connect();
    (client as unknown as { connection?: { stream?: { unref?: () => void } } }).connection?.stream?.unref?.();
    // Ask the server to probe this connection, so that a leader whose host
    // vanished (no FIN ever arrives) loses the lock in about 25 seconds, not
    // after the operating system's two-hour keepalive default. Ignored on a
    // Unix socket, where the question does not arise.
    await client.query(
      `SET application_name = 'stampeded-leader'; SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3`,
    );
    return client;
  }

  private drop(client: pg.Client, reason: string): void {
    if (this.client !== client) return;
    this.client = undefined;
    client.end().catch(() => {});
    if (this.leading) {
      this.leading = false;
      this.handlers.onDeposed(reason);
    }
  }

  /** Steps down (releasing the lock, so that a follower need not wait for the session to end) and closes the connection. */
  async stop(): Promise<void> {
    await this.stopChecks();
    const client = this.client;
    this.client = undefined;
    if (!client) return;
    if (this.leading) {
      this.leading = false;
      await this.query(client, RELEASE_LEADER_LOCK, [this.db.schema]).catch(() => {});
    }
    await client.end().catch(() => {});
  }
}
