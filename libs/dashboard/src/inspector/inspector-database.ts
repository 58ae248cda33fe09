import type { QueryResultRow } from 'pg';
import type { ReplicaStatus, Statement } from '@stampeded/nestjs/internal';

/** What the inspector needs of a database: StampededDatabase fits. */
export interface InspectorDatabase {
  query<Row extends QueryResultRow = QueryResultRow>(statement: Statement, values?: unknown[]): Promise<Row[]>;
  /** The schema Stampeded is installed in. */
  readonly schema: string;
}

/**
 * Where the inspector's lists, counts and charts read when they may lag: a
 * replica, which says how far behind it is. The core's ReadDatabase fits.
 */
export interface InspectorReads extends InspectorDatabase {
  /** Null when no replica is configured. */
  status(): Promise<ReplicaStatus | null>;
  /** Waits, up to `timeoutMs`, until the replica shows what the primary committed so far. */
  catchUp(timeoutMs: number): Promise<boolean>;
}
