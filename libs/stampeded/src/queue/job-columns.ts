import type { JobRow } from './job-input.validator.js';
import type { EnqueueOptions, JobOptions } from '../interfaces/job-options.interface.js';

/**
 * The columns of stampeded_jobs that an enqueue writes: the one list that
 * the enqueue statements (their input columns, insert and select lists),
 * the rows' serialisation, ENQUEUE_ONE's parameters, the job options a
 * schedule stores, the dead-letter redrive and the column defaults read at
 * startup are all made from. A new job option is a column here, a JobRow
 * field (the compiler asks for it: see the check below) and the line of
 * buildJobRow that fills it.
 */
export interface JobColumn {
  /** The column of stampeded_jobs, and the JobRow key that carries it. */
  readonly column: keyof JobRow;
  /** Its type as the enqueue statements read it from the batch's JSON (json_to_recordset), and as ENQUEUE_ONE casts it. */
  readonly type: string;
  /** What sets it: the enqueue option (by its path), or the enqueue's own task and args. */
  readonly option: EnqueueOptionPath;
  /**
   * How the insert writes it: `column` as it is read; `scheduled_at` read
   * into that column (runAt, or delayMs from now); `dedup` only by the
   * statements that look for a duplicate.
   */
  readonly stored: 'column' | 'scheduled_at' | 'dedup';
  /**
   * A JobOptions option: @Task(), registerQueue() and forRoot() may set it
   * as a default, layered under the enqueue's own options.
   */
  readonly layered?: true;
  /** JSON text, already validated: spliced into the batch's JSON as it is, not quoted as a string. */
  readonly json?: true;
  /**
   * How the job runs once enqueued (how long, how often, how it backs off,
   * where it dead-letters, whether it is kept): what a schedule stores for
   * the jobs it fires, and what a redriven job takes from its source.
   */
  readonly setting?: true;
  /** The JobColumnDefaults field that the column's DEFAULT is read into at startup, for the options layered over it. */
  readonly default?: string;
}

/** An enqueue option by its path (`backoff.baseMs`), or the enqueue's own task and args. */
type EnqueueOptionPath =
  Exclude<keyof EnqueueOptions, 'backoff' | 'dedup' | 'manager'> | 'task' | 'args' | 'backoff.baseMs' | 'backoff.maxMs' | 'dedup.scope' | 'dedup.period';

export const JOB_COLUMNS = [
  { column: 'queue', type: 'text', option: 'queue', stored: 'column', layered: true },
  { column: 'task', type: 'text', option: 'task', stored: 'column' },
  { column: 'args', type: 'json', option: 'args', stored: 'column', json: true },
  { column: 'meta', type: 'json', option: 'meta', stored: 'column', json: true },
  { column: 'tenant_id', type: 'text', option: 'tenantId', stored: 'column' },
  { column: 'priority', type: 'smallint', option: 'priority', stored: 'column', layered: true, default: 'priority' },
  { column: 'destination', type: 'text', option: 'destination', stored: 'column' },
  { column: 'run_at', type: 'timestamptz', option: 'runAt', stored: 'scheduled_at' },
  { column: 'delay_ms', type: 'double precision', option: 'delayMs', stored: 'scheduled_at' },
  { column: 'max_attempts', type: 'smallint', option: 'maxAttempts', stored: 'column', layered: true, setting: true, default: 'maxAttempts' },
  { column: 'expire_seconds', type: 'integer', option: 'expireSeconds', stored: 'column', layered: true, setting: true, default: 'expireSeconds' },
  { column: 'backoff_base_ms', type: 'smallint', option: 'backoff.baseMs', stored: 'column', layered: true, setting: true, default: 'backoffBaseMs' },
  { column: 'backoff_max_ms', type: 'integer', option: 'backoff.maxMs', stored: 'column', layered: true, setting: true, default: 'backoffMaxMs' },
  { column: 'max_interruptions', type: 'smallint', option: 'maxInterruptions', stored: 'column', layered: true, setting: true, default: 'maxInterruptions' },
  { column: 'max_deferrals', type: 'smallint', option: 'maxDeferrals', stored: 'column', layered: true, setting: true, default: 'maxDeferrals' },
  { column: 'dedup_scope', type: 'text', option: 'dedup.scope', stored: 'dedup' },
  { column: 'dedup_period', type: 'text', option: 'dedup.period', stored: 'dedup' },
  { column: 'dead_letter_queue', type: 'text', option: 'deadLetterQueue', stored: 'column', layered: true, setting: true },
  { column: 'remove_on_complete', type: 'boolean', option: 'removeOnComplete', stored: 'column', layered: true, setting: true },
  // A base longer than backoff_base_ms holds (backoffBaseColumns, migration 8).
  { column: 'backoff_base_wide_ms', type: 'integer', option: 'backoff.baseMs', stored: 'column', layered: true, setting: true },
  { column: 'ordering_key', type: 'text', option: 'orderingKey', stored: 'column' },
] as const satisfies readonly JobColumn[];

export type JobColumnName = (typeof JOB_COLUMNS)[number]['column'];

// The table and JobRow name the same columns (JobRow's debounce is not one):
// a column added to one and not the other does not compile.
type RowColumn = Exclude<keyof JobRow, 'debounce'>;
const sameColumns: [JobColumnName] extends [RowColumn] ? ([RowColumn] extends [JobColumnName] ? true : never) : never = true;
void sameColumns;

/** The columns a plain enqueue (no dedup) reads from its input, in order: ENQUEUE_ONE's parameters after the id. */
export const PLAIN_INPUT_COLUMNS: readonly JobColumnName[] = JOB_COLUMNS.filter((c) => c.stored !== 'dedup').map((c) => c.column);

/** The settings (see JobColumn.setting): what a schedule stores for its jobs, and a redriven job takes from its source. */
export const SETTING_COLUMNS: readonly JobColumnName[] = JOB_COLUMNS.filter(
  (c): c is Extract<(typeof JOB_COLUMNS)[number], { setting: true }> => 'setting' in c,
).map((c) => c.column);

type DefaultedColumn = Extract<(typeof JOB_COLUMNS)[number], { default: string }>;
/** The fields of JobColumnDefaults: the columns' DEFAULTs, read at startup, that the enqueue layers its options over. */
export type DefaultedOption = DefaultedColumn['default'];

/** The columns whose DEFAULT the enqueue layers its options over, by their JobColumnDefaults field. */
export const DEFAULTED_COLUMNS: readonly DefaultedColumn[] = JOB_COLUMNS.filter((c): c is DefaultedColumn => 'default' in c);

/** The columns that hold JSON text (args, meta). */
export const JSON_COLUMNS: ReadonlySet<JobColumnName> = new Set(JOB_COLUMNS.filter((c) => 'json' in c).map((c) => c.column));

type Row = (typeof JOB_COLUMNS)[number];
type TopLevel<Path extends string> = Path extends `${infer Head}.${string}` ? Head : Path;
/** An option by its name in the options object: `backoff` for `backoff.baseMs`. */
const topLevel = <Path extends string>(path: Path) => path.split('.')[0] as TopLevel<Path>;

/** The options @Task(), registerQueue(), forRoot() and enqueue() all take: JobOptions, by name. */
export const JOB_OPTION_NAMES = [
  ...new Set(JOB_COLUMNS.filter((c): c is Extract<Row, { layered: true }> => 'layered' in c).map((c) => topLevel(c.option))),
] as readonly TopLevel<Extract<Row, { layered: true }>['option']>[];

/** A column set by an option of the job's own, not layered, and not its task or args. */
type JobOwnColumn = Exclude<Row, { layered: true } | { option: 'task' | 'args' }>;

/** The options enqueue() takes: JobOptions, then the job's own (its time, tenant, destination, meta, dedup, key), and manager. */
export const ENQUEUE_OPTION_NAMES = [
  ...JOB_OPTION_NAMES,
  ...new Set(JOB_COLUMNS.filter((c): c is JobOwnColumn => !('layered' in c) && c.option !== 'task' && c.option !== 'args').map((c) => topLevel(c.option))),
  'manager',
] as const;

// The options the table names are JobOptions' and EnqueueOptions' own: an
// option added to one and not the other does not compile.
const sameJobOptions: [(typeof JOB_OPTION_NAMES)[number]] extends [keyof JobOptions]
  ? [keyof JobOptions] extends [(typeof JOB_OPTION_NAMES)[number]]
    ? true
    : never
  : never = true;
const sameEnqueueOptions: [(typeof ENQUEUE_OPTION_NAMES)[number]] extends [keyof EnqueueOptions]
  ? [keyof EnqueueOptions] extends [(typeof ENQUEUE_OPTION_NAMES)[number]]
    ? true
    : never
  : never = true;
void sameJobOptions;
void sameEnqueueOptions;
