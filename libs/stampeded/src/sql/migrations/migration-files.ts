import { readFileSync } from 'node:fs';
import { FORGET_ABSORBED_MIGRATIONS, NEGATED_VERSIONS_BACK, RENUMBER_BY_NAME } from './runner.sql.js';
import type { SqlRunner } from './migrations.js';

export interface MigrationFile {
  version: number;
  name: string;
  file: string;
}

/**
 * In order. The seed is 1, verbatim. A numbered migration changes tables,
 * columns, indexes and data, and is never edited once released; the SQL
 * functions live one to a file in ../functions/ (function-files.ts) and are
 * applied after the numbered migrations whenever their text changes.
 */
export const MIGRATION_FILES: readonly MigrationFile[] = [
  { version: 1, name: 'seed', file: '0001_seed.sql' },
  { version: 2, name: 'maintenance', file: '0002_maintenance.sql' },
  { version: 3, name: 'flow', file: '0003_flow.sql' },
  { version: 4, name: 'operations', file: '0004_operations.sql' },
  { version: 5, name: 'contention', file: '0005_contention.sql' },
  { version: 6, name: 'cost', file: '0006_cost.sql' },
  { version: 7, name: 'queue_pause', file: '0007_queue_pause.sql' },
  { version: 8, name: 'backoff_base', file: '0008_backoff_base.sql' },
  { version: 9, name: 'results', file: '0009_results.sql' },
  { version: 10, name: 'rate_limits', file: '0010_rate_limits.sql' },
  { version: 11, name: 'ordering', file: '0011_ordering.sql' },
  { version: 12, name: 'leader_lease', file: '0012_leader_lease.sql' },
  { version: 13, name: 'workflows', file: '0013_workflows.sql' },
  { version: 14, name: 'key_lines', file: '0014_key_lines.sql' },
  { version: 15, name: 'workflow_keys', file: '0015_workflow_keys.sql' },
  { version: 16, name: 'job_logs', file: '0016_job_logs.sql' },
  { version: 17, name: 'dedup_follow_ups', file: '0017_dedup_follow_ups.sql' },
  { version: 18, name: 'operator_marks', file: '0018_operator_marks.sql' },
  { version: 19, name: 'insights', file: '0019_insights.sql' },
];

export const LATEST_VERSION = MIGRATION_FILES[MIGRATION_FILES.length - 1].version;

/**
 * Migrations of the numbering used before the functions moved to their own
 * files, which those files replaced whole: an install that recorded them has
 * what they made, and its rows go. The others keep their name under a new
 * version (renumberRecorded).
 */
const ABSORBED_MIGRATIONS = ['runtime', 'reliability', 'throughput'];

/**
 * Brings an install's record to the current numbering, by name: names are
 * unique and never reused, so this is a no-op on a current install.
 */
export async function renumberRecorded(run: SqlRunner): Promise<void> {
  await run(FORGET_ABSORBED_MIGRATIONS, [ABSORBED_MIGRATIONS]);
  await run(RENUMBER_BY_NAME, [MIGRATION_FILES.map((m) => m.version), MIGRATION_FILES.map((m) => m.name)]);
  await run(NEGATED_VERSIONS_BACK);
}

const sqlCache = new Map<string, string>();
/** A migration's SQL, read once from its file beside this one. */
export function migrationSql(file: string): string {
  let text = sqlCache.get(file);
  if (text === undefined) {
    text = readFileSync(new URL(`./${file}`, import.meta.url), 'utf8');
    sqlCache.set(file, text);
  }
  return text;
}
