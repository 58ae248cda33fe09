import { CliError, EXIT } from '../connection/cli-errors.js';
import { BAD_NUMBER } from '../cli.messages.js';

/** Where a run of the CLI reads its environment and writes: the process's own, or a test's. */
export interface CliIo {
  stdout: { write(text: string): unknown; isTTY?: boolean };
  stderr: { write(text: string): unknown; isTTY?: boolean };
  env: Record<string, string | undefined>;
  /** Set by a command that printed its result but must still exit non-zero (health). */
  exitCode?: number;
}

export interface OutputOptions {
  json?: boolean;
  io: CliIo;
}

/** Writes a command's result: JSON for scripts with --json, otherwise the human rendering. */
export function emit(options: OutputOptions, data: unknown, human: () => string): void {
  options.io.stdout.write(options.json ? `${JSON.stringify(data, null, 2)}\n` : `${human()}\n`);
}

/**
 * Progress of a long command, on stderr so that stdout stays the result. On
 * a terminal one line is rewritten in place; in a pipe or a log each update
 * is its own line.
 */
export function progress(io: CliIo, message: string): void {
  if (io.stderr.isTTY) io.stderr.write(`\r\x1b[K${message}`);
  else io.stderr.write(`${message}\n`);
}

export function endProgress(io: CliIo): void {
  if (io.stderr.isTTY) io.stderr.write('\n');
}

/** A plain text table: a header, a rule, and one line per row, columns padded to their widest cell. */
export function table(columns: string[], rows: unknown[][]): string {
  const cells = rows.map((row) => row.map(cell));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((r) => r[i].length)));
  const line = (values: string[]) =>
    values
      .map((v, i) => v.padEnd(widths[i]))
      .join('  ')
      .trimEnd();
  return [line(columns), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
}

/** Label: value lines, for one record. */
export function fields(entries: [string, unknown][]): string {
  const width = Math.max(...entries.map(([k]) => k.length));
  return entries.map(([k, v]) => `${`${k}:`.padEnd(width + 1)} ${cell(v)}`).join('\n');
}

export function cell(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.length ? value.map(cell).join(',') : '-';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value).replace(/\s+/g, ' ');
}

export function positiveInt(option: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1) throw new CliError(BAD_NUMBER(option, value), EXIT.usage);
    return n;
  };
}
