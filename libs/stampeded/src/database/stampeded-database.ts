import pg from 'pg';
import type { Pool, PoolClient, PoolConfig, QueryConfig, QueryResultRow } from 'pg';
import { qualify, quoteIdent, type Statement } from '../sql/statement.js';

function ignoreError(): void {}

/**
 * A client outside the pool, of the config's own Client class when it names
 * one (writableHostClient()), as the pool's clients are: a LISTEN or a
 * leader connection must reach the server the pool reaches.
 */
export function clientFor(config: PoolConfig): pg.Client {
  const Client = (config.Client ?? pg.Client) as typeof pg.Client;
  return new Client(config);
}

/** SQLSTATEs worth one more try: the transaction lost a race, not an argument. */
const RETRYABLE_SQLSTATES = new Set(['40001', '40P01']);

/** What the connections may rely on: everything (a direct connection), or no more than a transaction-mode pooler keeps. */
export interface SessionSupport {
  /**
   * Whether a connection is one session from connect to close: session
   * advisory locks, LISTEN and the leader's dedicated connection rely on it.
   * False behind a transaction-mode pooler. Default true.
   */
  session?: boolean;
  /** Whether statements are prepared by name, once per connection. Default true. */
  prepared?: boolean;
  /**
   * Where to LISTEN: a direct connection's settings. Default: the pool's own
   * settings when `session`, and nowhere otherwise (the runtime polls).
   */
  listen?: PoolConfig;
}

/**
 * Stampeded's own connections to the database: a pool for statements, and
 * fresh clients for LISTEN. Its own, rather than the app's TypeORM pool,
 * because the worker holds a connection to LISTEN and claims in a tight loop:
 * neither should queue behind the app's requests, nor starve them.
 */
export class StampededDatabase {
  readonly pool: Pool;
  /** Whether connections keep session state (see SessionSupport.session). */
  readonly session: boolean;
  /** Whether statements go by name (see SessionSupport.prepared). */
  readonly prepared: boolean;
  private readonly listenConfig?: PoolConfig;
  private readonly qualified = new Map<Statement, Statement>();
  private closed = false;
  /**
   * Idle pool connections the server ended (a restart, a failover): after
   * one, LostClaims looks for jobs the database says are this worker's and
   * the worker does not know of.
   */
  lostConnections = 0;

  constructor(
    private readonly config: PoolConfig,
    readonly schema: string,
    support: SessionSupport = {},
  ) {
    this.session = support.session ?? true;
    this.prepared = support.prepared ?? true;
    this.listenConfig = support.listen ?? (this.session ? config : undefined);
    this.pool = new pg.Pool(config);
    // An idle client that loses its connection (a restarted server) emits
    // here; without a listener that error would take the process down.
    this.pool.on('error', () => this.lostConnections++);
  }

  get channelPrefix(): string {
    return this.schema;
  }

  /** The statement bound to this install's schema, built once. */
  statement(statement: Statement): Statement {
    let bound = this.qualified.get(statement);
    if (!bound) {
      bound = qualify(statement, this.schema);
      this.qualified.set(statement, bound);
    }
    return bound;
  }

  /**
   * The statement as node-postgres runs it: named (prepared once per
   * connection) or, behind a pooler that cannot keep a prepared statement
   * with the connection it was prepared on, unnamed (parsed each time).
   */
  queryConfig(statement: Statement, values: unknown[]): QueryConfig {
    const bound = this.statement(statement);
    return this.prepared ? { name: bound.name, text: bound.text, values } : { text: bound.text, values };
  }

  async query<Row extends QueryResultRow = QueryResultRow>(statement: Statement, values: unknown[] = []): Promise<Row[]> {
    const config = this.queryConfig(statement, values);
    for (let attempt = 1; ; attempt++) {
      try {
        const result = await this.pool.query<Row>(config);
        return result.rows;
      } catch (err) {
        if (attempt < 3 && RETRYABLE_SQLSTATES.has((err as { code?: string }).code ?? '')) continue;
        throw err;
      }
    }
  }

  /**
   * Readies `connections` pool connections for the hot path: each is opened
   * (one at a time, for a pool, when a burst first needs it: a connect and an
   * authentication), and each statement is prepared and run once on it, which
   * also compiles the functions and triggers it calls in that backend, in a
   * transaction that is rolled back: nothing it does is kept or seen, not
   * even a NOTIFY. Without it the first jobs after a start pay for all of
   * that, and wait many times longer than the rest (bench/RESULTS.md). Best
   * effort: a failure here is the first statement's to report.
   */
  async warm(statements: readonly { statement: Statement; values: unknown[] }[], connections = 2): Promise<void> {
    const count = Math.max(1, Math.min(connections, this.config.max ?? 10));
    // Held at once, so that they are distinct connections.
    const clients = await Promise.all(Array.from({ length: count }, () => this.pool.connect().catch(() => undefined)));
    await Promise.all(
      clients.map(async (client) => {
        if (!client) return;
        client.on('error', ignoreError);
        try {
          await client.query('BEGIN');
          for (const { statement, values } of statements) await client.query(this.queryConfig(statement, values));
        } catch {
          // Reported by the real statement, if it fails too.
        } finally {
          await client.query('ROLLBACK').catch(() => {});
          client.off('error', ignoreError);
          client.release();
        }
      }),
    );
  }

  /** Runs unprepared SQL text: migrations, DDL, one-off reports. */
  async raw<Row extends QueryResultRow = QueryResultRow>(text: string, values?: unknown[]): Promise<Row[]> {
    return (await this.pool.query<Row>(text, values)).rows;
  }

  async transaction<T>(work: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    // The pool listens for a client's 'error' only while it is idle: a
    // connection cut while a transaction holds it (pg_terminate_backend, a
    // restarted server) is an 'error' event with no listener, which would end
    // the process. The statement in flight fails with the error all the same.
    client.on('error', ignoreError);
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.off('error', ignoreError);
      client.release();
    }
  }

  /** A client outside the pool, for a session of its own (the maintenance leader's lock). */
  newClient(): pg.Client {
    return clientFor(this.config);
  }

  /** Whether this app can LISTEN: on its own connection, or on the direct one it was given. */
  get canListen(): boolean {
    return this.listenConfig !== undefined;
  }

  /** A client for LISTEN, which must stay on one session; undefined when there is nowhere to LISTEN. */
  newListenClient(): pg.Client | undefined {
    return this.listenConfig ? clientFor(this.listenConfig) : undefined;
  }

  quotedSchema(): string {
    return quoteIdent(this.schema);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
  }
}
