import type { JobRow } from './job-input.validator.js';
import { ENQUEUE_ONE_KEYS } from '../sql/enqueue.sql.js';
import { JOB_COLUMNS, JSON_COLUMNS, type JobColumnName } from './job-columns.js';

const ROW_KEYS = JOB_COLUMNS.map((c) => c.column);

/**
 * The enqueue statements' two parameters: every row's own values, and the
 * values all rows share, written once. A bulk enqueue of one task sends
 * {"args":...} per job and its queue, task and options once, so that the
 * database does not parse them again for every row (bench/RESULTS.md). A
 * NULL column is left out (json_to_recordset reads a missing key as NULL).
 * args and meta are already-validated JSON text: spliced in as JSON, not
 * serialised twice. With `ids`, each row carries its id first; with
 * `extra`, each row's members of a statement's own columns (JSON members).
 */
export function rowsToJson(rows: JobRow[], ids?: string[], extra?: string[]): [rows: string, shared: string] {
  const shared: JobColumnName[] = [];
  const own: JobColumnName[] = [];
  for (const key of ROW_KEYS) {
    const first = rows[0]?.[key];
    if (first === null || first === undefined) own.push(key);
    else if (rows.every((row) => row[key] === first)) shared.push(key);
    else own.push(key);
  }
  const member = (key: JobColumnName, value: JobRow[JobColumnName]) =>
    `"${key}":${JSON_COLUMNS.has(key) || typeof value !== 'string' ? value : JSON.stringify(value)}`;
  const parts = new Array<string>(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i];
    const members: string[] = ids ? [`"id":"${ids[i]}"`] : [];
    if (extra) members.push(extra[i]);
    for (const key of own) {
      const value = row[key];
      if (value !== null && value !== undefined) members.push(member(key, value));
    }
    parts[i] = `{${members.join(',')}}`;
  }
  return [`[${parts.join(',')}]`, `{${shared.map((key) => member(key, rows[0][key])).join(',')}}`];
}

/** ENQUEUE_ONE's parameters: one job's values, as parameters of their own rather than a JSON batch. */
export function rowToParameters(row: JobRow, id: string): unknown[] {
  const values = new Array<unknown>(ENQUEUE_ONE_KEYS.length + 1);
  values[0] = id;
  for (let i = 0; i < ENQUEUE_ONE_KEYS.length; i++) values[i + 1] = row[ENQUEUE_ONE_KEYS[i]];
  return values;
}
