import type { OnApplicationShutdown } from '@nestjs/common';
import type { QueryResultRow } from 'pg';
import type { Statement } from '../sql/statement.js';
import { PRIMARY_WAL_END, REPLAYED_UP_TO, REPLICA_LAG } from '../sql/replica.sql.js';
import { READS_ON_PRIMARY } from '../stampeded.messages.js';
import type { StampededDatabase } from './stampeded-database.js';

/** How far behind the replica that reads go to is, or that they go to the primary while it does not answer. */
export interface ReplicaStatus {
  /** Where reads go now: the replica, or the primary while the replica does not answer. */
  readingFrom: 'replica' | 'primary';
  /** It has replayed all the WAL it received (or is not a standby): it shows what the primary had when it sent it. */
  caughtUp: boolean;
  /** How far its data is behind: 0 when caught up, the age of its last replayed transaction otherwise; null when unknown. */
  lagSeconds: number | null;
  /** Why reads went to the primary: the replica's error. */
  error?: string;
}

/** How long reads stay on the primary after the replica failed to answer, before it is tried again. */
const RETRY_REPLICA_MS = 5_000;
/** How often catchUp() asks the replica how far it has replayed. */
const CATCH_UP_POLL_MS = 25;

/** Errors that say the replica is not there to answer, rather than that a statement was wrong. */
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE']);

function unreachable(err: unknown): boolean {
  const code = String((err as { code?: unknown })?.code ?? '');
  // 08: connection exceptions; 28: refused credentials; 3D000: no such database (a standby
  // that has not replayed its creation yet); 57P01-03: shut down, or starting up.
  if (UNREACHABLE_CODES.has(code) || /^(08|28)/.test(code) || code === '3D000' || /^57P0[123]$/.test(code)) return true;
  // node-postgres's own, which carry no code: the connect timeout, a connection that ended.
  return /timeout exceeded when trying to connect|Connection terminated/i.test((err as Error)?.message ?? '');
}

/**
 * Where the reads that may lag go: the dashboard's lists, counts and charts,
 * the metrics scrape, getJob(id, { replica: true }). The replica that
 * `readConnection` names when one is set, the primary otherwise. While the
 * replica does not answer, they go to the primary (and say so in status()),
 * trying the replica again every few seconds, so that a standby being
 * rebuilt leaves the dashboard working, on the primary's load. Everything
 * that writes, or must see its own writes, holds the primary's
 * StampededDatabase instead.
 */
export class ReadDatabase implements OnApplicationShutdown {
  /** Until when reads skip the replica, after it failed to answer. */
  private skipUntil = 0;
  /** The replica's last failure, while reads go to the primary. */
  private failure?: string;

  constructor(
    private readonly primary: StampededDatabase,
    private readonly replica?: StampededDatabase,
    /** Where a fall back to the primary is told (the module's Logger). */
    private readonly log: { warn(message: string): void } = { warn() {} },
  ) {}

  get schema(): string {
    return this.primary.schema;
  }

  /** Whether a replica is configured. */
  get replicated(): boolean {
    return this.replica !== undefined;
  }

  async query<Row extends QueryResultRow = QueryResultRow>(statement: Statement, values: unknown[] = []): Promise<Row[]> {
    return this.onReplica(
      (replica) => replica.query<Row>(statement, values),
      () => this.primary.query<Row>(statement, values),
    );
  }

  /** Null when no replica is configured. */
  async status(): Promise<ReplicaStatus | null> {
    if (!this.replica) return null;
    return this.onReplica<ReplicaStatus>(
      async (replica) => {
        const [row] = await replica.query<{ standby: boolean; replayed_all: boolean | null; replay_age: number | null }>(REPLICA_LAG);
        const caughtUp = !row.standby || row.replayed_all === true;
        const lagSeconds = caughtUp ? 0 : row.replay_age === null ? null : Math.max(0, Number(row.replay_age));
        return { readingFrom: 'replica', caughtUp, lagSeconds };
      },
      async () => ({ readingFrom: 'primary', caughtUp: false, lagSeconds: null, error: this.failure }),
    );
  }

  /**
   * Waits until the replica has replayed what the primary committed before
   * this call, or `timeoutMs` passed; true when it has (or reads go to the
   * primary). A page read after an operator's action then shows the action.
   */
  async catchUp(timeoutMs: number): Promise<boolean> {
    if (!this.replica || Date.now() < this.skipUntil) return true;
    try {
      const [{ lsn }] = await this.primary.query<{ lsn: string }>(PRIMARY_WAL_END);
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const [{ replayed }] = await this.replica.query<{ replayed: boolean }>(REPLAYED_UP_TO, [lsn]);
        if (replayed) return true;
        if (Date.now() >= deadline) return false;
        await new Promise((resolve) => setTimeout(resolve, CATCH_UP_POLL_MS));
      }
    } catch (err) {
      if (!unreachable(err)) throw err;
      this.failed(err);
      return true;
    }
  }

  async onApplicationShutdown(): Promise<void> {
    await this.replica?.close();
  }

  private async onReplica<T>(read: (replica: StampededDatabase) => Promise<T>, fallback: () => Promise<T>): Promise<T> {
    if (!this.replica || Date.now() < this.skipUntil) return fallback();
    try {
      const result = await read(this.replica);
      this.failure = undefined;
      return result;
    } catch (err) {
      if (!unreachable(err)) throw err;
      this.failed(err);
      return fallback();
    }
  }

  private failed(err: unknown): void {
    const reason = ((err as Error)?.message || String((err as { code?: unknown })?.code ?? err)).split('\n')[0];
    if (this.failure === undefined) this.log.warn(READS_ON_PRIMARY(reason, RETRY_REPLICA_MS / 1000));
    this.failure = reason;
    this.skipUntil = Date.now() + RETRY_REPLICA_MS;
  }
}
