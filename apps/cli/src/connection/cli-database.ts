import pg from 'pg';
import type { QueryResultRow } from 'pg';
import type { InspectorDatabase } from '@stampeded/dashboard/inspector';

/**
 * The CLI's own small pool, bound to the install's schema by search_path at
 * connection start. Not StampededDatabase: that lives in @stampeded/nestjs,
 * whose import brings Nest and TypeORM and costs a second of start-up on
 * every command; a CLI that scripts call in a loop should start at once.
 */
export class CliDatabase implements InspectorDatabase {
  private readonly pool: pg.Pool;

  constructor(
    connectionString: string,
    readonly schema: string,
  ) {
    this.pool = new pg.Pool({
      connectionString,
      max: 2,
      connectionTimeoutMillis: 10_000,
      // pg_temp last, as the runtime pins its functions: a temporary table cannot shadow ours.
      options: `-c search_path=${escapeOption(quoteIdent(schema))},pg_temp`,
      application_name: 'stampeded-cli',
    });
    this.pool.on('error', () => {});
  }

  async query<Row extends QueryResultRow = QueryResultRow>(statement: { name: string; text: string }, values: unknown[] = []): Promise<Row[]> {
    return (await this.pool.query<Row>({ name: statement.name, text: statement.text, values })).rows;
  }

  async raw<Row extends QueryResultRow = QueryResultRow>(text: string, values?: unknown[]): Promise<Row[]> {
    return (await this.pool.query<Row>(text, values)).rows;
  }

  close(): Promise<void> {
    return this.pool.end();
  }
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** The startup `options` string splits on spaces; a backslash keeps one inside a value. */
function escapeOption(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/ /g, '\\ ');
}
