import type { QueryResultRow } from 'pg';
import type { Statement } from '@stampeded/nestjs/internal';

/** What the inspector needs of a database: StampededDatabase fits. */
export interface InspectorDatabase {
  query<Row extends QueryResultRow = QueryResultRow>(statement: Statement, values?: unknown[]): Promise<Row[]>;
  /** The schema Stampeded is installed in. */
  readonly schema: string;
}
