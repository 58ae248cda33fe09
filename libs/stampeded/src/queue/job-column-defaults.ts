import type { Provider } from '@nestjs/common';
import { StampededDatabase } from '../database/stampeded-database.js';
import { StampededConfigError } from '../errors/stampeded.errors.js';
import { JOB_COLUMN_DEFAULTS } from '../stampeded.constants.js';
import { READ_JOB_COLUMN_DEFAULTS } from '../sql/enqueue.sql.js';
import { DEFAULTED_COLUMNS, type DefaultedOption } from './job-columns.js';
import { UNREADABLE_COLUMN_DEFAULT } from '../stampeded.messages.js';

/** What a job gets for each option it does not set, at any layer: the jobs table's column defaults (JOB_COLUMNS' `default`). */
export type JobColumnDefaults = Record<DefaultedOption, number>;

/** A default as pg_get_expr prints a constant: `25`, `'25'::smallint`, `(-1)`. */
export function parseIntegerDefault(expression: string): number | undefined {
  const match = /^\(?'?(-?\d+)'?\)?(?:::[a-z ]+)?$/.exec(expression.trim());
  return match ? Number(match[1]) : undefined;
}

export async function readJobColumnDefaults(db: StampededDatabase): Promise<JobColumnDefaults> {
  const rows = await db.query<{ name: string; expression: string }>(READ_JOB_COLUMN_DEFAULTS, [
    `${db.quotedSchema()}.stampeded_jobs`,
    DEFAULTED_COLUMNS.map((c) => c.column),
  ]);
  const byColumn = new Map(rows.map((r) => [r.name, r.expression]));
  const defaults = {} as JobColumnDefaults;
  for (const { column, default: option } of DEFAULTED_COLUMNS) {
    const expression = byColumn.get(column);
    const value = expression === undefined ? undefined : parseIntegerDefault(expression);
    if (value === undefined) throw new StampededConfigError(UNREADABLE_COLUMN_DEFAULT(db.schema, column, expression));
    defaults[option] = value;
  }
  return defaults;
}

/** Read once, at startup, after the database provider has checked the schema. */
export function createJobColumnDefaultsProvider(): Provider {
  return { provide: JOB_COLUMN_DEFAULTS, inject: [StampededDatabase], useFactory: readJobColumnDefaults };
}
