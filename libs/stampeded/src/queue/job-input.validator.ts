import { DEFAULT_QUEUE, LIMITS, RUNTIME_META_KEY } from '../stampeded.constants.js';
import type { JobColumnDefaults } from './job-column-defaults.js';
import { ENQUEUE_OPTION_NAMES, JOB_OPTION_NAMES } from './job-columns.js';
import { INVALID_OPTION, META_NOT_BUILT_BY_RUNTIME, NOT_A_JOB_ID, UNKNOWN_OPTIONS } from '../stampeded.messages.js';
import { InvalidJobError } from '../errors/stampeded.errors.js';
import type { DedupMode, DedupPeriod, EnqueueOptions, JobOptions } from '../interfaces/job-options.interface.js';

/** One job, validated and with every column the insert lists filled. */
export interface JobRow {
  queue: string;
  task: string;
  args: string; // JSON text, already validated
  meta: string;
  tenant_id: string | null;
  priority: number;
  destination: string | null;
  run_at: string | null;
  delay_ms: number | null;
  expire_seconds: number;
  max_attempts: number;
  backoff_base_ms: number;
  /** The base when it is longer than backoff_base_ms holds, or null (see backoffBaseColumns). */
  backoff_base_wide_ms: number | null;
  backoff_max_ms: number;
  max_interruptions: number;
  max_deferrals: number;
  dedup_scope: string | null;
  dedup_period: DedupPeriod | null;
  dead_letter_queue: string | null;
  remove_on_complete: boolean;
  /** The job's place in a line of jobs run one at a time (docs/ordering.md), or null. */
  ordering_key: string | null;
  /** Not a column: what a duplicate does to the waiting job of its scope, when it changes it (dedup mode replace or extend). */
  debounce?: Debounce;
}

/** A dedup mode that changes the waiting twin, and the cap on how far `extend` pushes it (null: none). */
export interface Debounce {
  mode: Exclude<DedupMode, 'keep'>;
  maxDelayMs: number | null;
}

/** The job options among a task's @Task() options: what its jobs take as defaults. */
export function jobOptionsOf(options: JobOptions): JobOptions {
  const picked: Record<string, unknown> = {};
  for (const name of JOB_OPTION_NAMES) if (options[name] !== undefined) picked[name] = options[name];
  return picked as JobOptions;
}

const DEDUP_PERIODS: readonly DedupPeriod[] = ['minute', 'hour', 'day', 'week', 'month'];
const DEDUP_MODES: readonly DedupMode[] = ['keep', 'replace', 'extend'];
const QUEUE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.:-]*$/;

/** Refuses an option: what was wrong with it and what to pass instead. */
export function fail(where: string, option: string, problem: string): never {
  throw new InvalidJobError(INVALID_OPTION(where, option, problem));
}

/** Refuses option names that are not among `allowed`, naming both. */
export function rejectUnknown(where: string, given: object, allowed: readonly string[]): void {
  const unknown = Object.keys(given).filter((k) => !allowed.includes(k));
  if (unknown.length) throw new InvalidJobError(UNKNOWN_OPTIONS(where, unknown, allowed));
}

function integerIn(where: string, option: string, value: unknown, min: number, max: number, column: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    fail(where, option, `must be an integer from ${min} to ${max} (the ${column} column), got ${describe(value)}`);
  }
  return value;
}

/** A value, short, as an error message quotes it. */
export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || value == null) return String(value);
  if (Array.isArray(value)) return 'an array';
  return typeof value;
}

export function validateQueueName(where: string, option: string, value: unknown): string {
  if (typeof value !== 'string' || value.length === 0) fail(where, option, `must be a non-empty string, got ${describe(value)}`);
  if (value.length > LIMITS.queueNameLength || !QUEUE_NAME.test(value)) {
    fail(
      where,
      option,
      `must be 1 to ${LIMITS.queueNameLength} characters of letters, digits, "_", ".", ":" or "-", starting with a letter or digit ` +
        `(it names a Postgres partition, whose name is limited to 63 bytes), got ${describe(value)}`,
    );
  }
  return value;
}

function nonEmptyString(where: string, option: string, value: unknown, maxLength = 1000): string {
  if (typeof value !== 'string' || value.length === 0) fail(where, option, `must be a non-empty string, got ${describe(value)}`);
  if (value.length > maxLength) fail(where, option, `must be at most ${maxLength} characters, got ${value.length}`);
  if (!value.isWellFormed() || value.includes('\u0000')) {
    fail(where, option, 'contains a NUL character or an unpaired surrogate, which PostgreSQL text cannot store');
  }
  return value;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A job's (or a workflow's) id: a UUID, refused before it reaches a statement. */
export function validateJobId(where: string, id: unknown): string {
  if (typeof id !== 'string' || !UUID.test(id)) throw new InvalidJobError(NOT_A_JOB_ID(where, id));
  return id;
}

/** A task's name as the schema stores it: what buildJobRow accepts for `task`. */
export function validateTaskName(where: string, option: string, value: unknown): string {
  return nonEmptyString(where, option, value, 1000);
}

/**
 * Serialises a JSON object the way PostgreSQL will accept it, or says why not.
 * jsonb refuses \u0000 and unpaired surrogates that JSON.stringify happily
 * writes; finding that out from the server means an error that names neither
 * the job nor the field.
 */
export function toJsonObject(where: string, option: string, value: unknown, maxBytes: number): string {
  if (value === undefined) return '{}';
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    fail(where, option, `must be a plain JSON object (named arguments), got ${describe(value)}; wrap it: { value: ... }`);
  }
  // A plain object from any realm (a vm context, a message from a child
  // process): its prototype is null or is itself a root prototype.
  const proto = Object.getPrototypeOf(value);
  if (proto !== null && Object.getPrototypeOf(proto) !== null) {
    fail(where, option, `must be a plain JSON object, got an instance of ${(value as object).constructor?.name ?? 'a class'}; pass its fields instead`);
  }
  checkJsonValue(option, value, 0, new Set(), (path, problem) => fail(where, path, problem));
  const text = JSON.stringify(value);
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > maxBytes) {
    fail(where, option, `is ${bytes} bytes as JSON, over the ${maxBytes}-byte limit; store large payloads elsewhere and pass a reference`);
  }
  return text;
}

/** Says why, through `refuse`, when a value at `path` is one PostgreSQL jsonb would not store as JSON.stringify writes it. */
type Refuse = (path: string, problem: string) => never;

/**
 * Any JSON value (an object, an array, a string, a number, a boolean) as the
 * JSON text PostgreSQL jsonb stores, by the rules of toJsonObject; `refuse`
 * is told what is wrong with it otherwise, `name` being its root's name in
 * the path it is given.
 */
export function toJsonText(value: unknown, name: string, refuse: Refuse): string {
  checkJsonValue(name, value, 0, new Set(), refuse);
  const text = JSON.stringify(value) as string | undefined;
  // A function or undefined at the root, which JSON.stringify writes as nothing.
  if (text === undefined) refuse(name, `is ${typeof value}, which JSON cannot represent`);
  return text;
}

function checkJsonValue(path: string, value: unknown, depth: number, seen: Set<object>, refuse: Refuse): void {
  if (depth > LIMITS.jsonDepth) refuse(path, `is nested more than ${LIMITS.jsonDepth} levels deep; flatten it`);
  switch (typeof value) {
    case 'string':
      if (value.includes('\u0000') || !value.isWellFormed()) {
        refuse(path, 'contains a NUL character or an unpaired surrogate, which PostgreSQL jsonb cannot store');
      }
      return;
    case 'number':
      if (!Number.isFinite(value)) refuse(path, `is ${value}, which JSON cannot represent`);
      return;
    case 'boolean':
      return;
    case 'object': {
      if (value === null) return;
      if (seen.has(value)) refuse(path, 'refers to itself (a cycle), which JSON cannot represent');
      if (value instanceof Date) return;
      seen.add(value);
      if (Array.isArray(value)) value.forEach((item, i) => checkJsonValue(`${path}[${i}]`, item, depth + 1, seen, refuse));
      else {
        for (const [key, item] of Object.entries(value)) {
          if (key.includes('\u0000') || !key.isWellFormed()) refuse(`${path} key ${JSON.stringify(key)}`, 'cannot be stored by PostgreSQL jsonb');
          if (item !== undefined && typeof item !== 'function') checkJsonValue(`${path}.${key}`, item, depth + 1, seen, refuse);
        }
      }
      seen.delete(value);
      return;
    }
    case 'undefined':
    case 'function':
      return; // dropped by JSON.stringify, as in any JSON API
    default:
      refuse(path, `is a ${typeof value}, which JSON cannot represent; convert it (a bigint to a string, say)`);
  }
}

/** Validates options that @Task(), registerQueue() and forRoot() may set; returns them unchanged. */
export function validateJobOptions(where: string, options: JobOptions | undefined, allowed: readonly string[] = JOB_OPTION_NAMES): JobOptions {
  if (options === undefined) return {};
  if (options === null || typeof options !== 'object') fail(where, 'options', `must be an object, got ${describe(options)}`);
  rejectUnknown(where, options, allowed);
  const { smallint, integer } = LIMITS;
  if (options.queue !== undefined) validateQueueName(where, 'queue', options.queue);
  if (options.priority !== undefined) integerIn(where, 'priority', options.priority, smallint.min, smallint.max, 'smallint priority');
  if (options.maxAttempts !== undefined) integerIn(where, 'maxAttempts', options.maxAttempts, 1, smallint.max, 'smallint max_attempts');
  if (options.expireSeconds !== undefined) integerIn(where, 'expireSeconds', options.expireSeconds, 1, integer.max, 'integer expire_seconds');
  if (options.maxInterruptions !== undefined) integerIn(where, 'maxInterruptions', options.maxInterruptions, 0, smallint.max, 'smallint max_interruptions');
  if (options.maxDeferrals !== undefined) integerIn(where, 'maxDeferrals', options.maxDeferrals, 0, smallint.max, 'smallint max_deferrals');
  if (options.backoff !== undefined) {
    if (options.backoff === null || typeof options.backoff !== 'object') fail(where, 'backoff', 'must be an object { baseMs?, maxMs? }');
    rejectUnknown(`${where} backoff`, options.backoff, ['baseMs', 'maxMs']);
    if (options.backoff.baseMs !== undefined) integerIn(where, 'backoff.baseMs', options.backoff.baseMs, 1, integer.max, 'integer backoff_base_wide_ms');
    if (options.backoff.maxMs !== undefined) integerIn(where, 'backoff.maxMs', options.backoff.maxMs, 1, integer.max, 'integer backoff_max_ms');
  }
  if (options.deadLetterQueue !== undefined) validateQueueName(where, 'deadLetterQueue', options.deadLetterQueue);
  if (options.removeOnComplete !== undefined && typeof options.removeOnComplete !== 'boolean') {
    fail(where, 'removeOnComplete', `must be true or false, got ${describe(options.removeOnComplete)}`);
  }
  return options;
}

/**
 * Merges the layers of defaults (module, queue, task) under the enqueue's own
 * options, over the jobs table's column defaults, and turns them into one
 * insertable row, or throws before anything is written.
 */
export function buildJobRow(where: string, task: string, args: unknown, options: EnqueueOptions, defaults: JobOptions[], columns: JobColumnDefaults): JobRow {
  nonEmptyString(where, 'task', task, 1000);
  validateJobOptions(where, options, ENQUEUE_OPTION_NAMES);
  const merged: JobOptions = {};
  for (const layer of [...defaults, options]) {
    for (const [key, value] of Object.entries(layer)) {
      if (value === undefined) continue;
      if (key === 'backoff') merged.backoff = { ...merged.backoff, ...(value as JobOptions['backoff']) };
      else (merged as Record<string, unknown>)[key] = value;
    }
  }
  const queue = merged.queue ?? DEFAULT_QUEUE;
  validateQueueName(where, 'queue', queue);

  if (options.runAt !== undefined && options.delayMs !== undefined) fail(where, 'runAt', 'and delayMs cannot both be set; pick one');
  let runAt: string | null = null;
  if (options.runAt !== undefined) {
    if (!(options.runAt instanceof Date) || Number.isNaN(options.runAt.getTime())) fail(where, 'runAt', `must be a valid Date, got ${describe(options.runAt)}`);
    // PostgreSQL reads a year past 9999 in ISO form ("+275760-...") as a
    // time zone and fails with an error that names neither the job nor the
    // option.
    const year = options.runAt.getUTCFullYear();
    if (year < 1 || year > 9999) fail(where, 'runAt', `must be a date from year 1 to 9999, got ${options.runAt.toISOString()}`);
    runAt = options.runAt.toISOString();
  }
  if (options.delayMs !== undefined) {
    if (typeof options.delayMs !== 'number' || !Number.isFinite(options.delayMs) || options.delayMs < 0) {
      fail(where, 'delayMs', `must be a finite number of milliseconds, 0 or more, got ${describe(options.delayMs)}`);
    }
  }
  const tenantId = options.tenantId === undefined ? null : nonEmptyString(where, 'tenantId', options.tenantId);
  const destination = options.destination === undefined ? null : nonEmptyString(where, 'destination', options.destination);
  const orderingKey = options.orderingKey === undefined ? null : nonEmptyString(where, 'orderingKey', options.orderingKey, LIMITS.orderingKeyLength);

  let dedupScope: string | null = null;
  let dedupPeriod: DedupPeriod | null = null;
  let debounce: Debounce | undefined;
  let delayMs = options.delayMs ?? null;
  if (options.dedup !== undefined) {
    if (options.dedup === null || typeof options.dedup !== 'object') fail(where, 'dedup', 'must be an object { scope, period?, mode?, delayMs?, maxDelayMs? }');
    rejectUnknown(`${where} dedup`, options.dedup, ['scope', 'period', 'mode', 'delayMs', 'maxDelayMs']);
    dedupScope = nonEmptyString(where, 'dedup.scope', options.dedup.scope, LIMITS.dedupScopeBytes);
    if (options.dedup.period !== undefined) {
      if (!DEDUP_PERIODS.includes(options.dedup.period)) {
        fail(where, 'dedup.period', `must be one of ${DEDUP_PERIODS.join(', ')}, got ${describe(options.dedup.period)}`);
      }
      dedupPeriod = options.dedup.period;
    }
    debounce = debounceOf(where, options);
    // An extended job's run time is its delay after the newest request, the first one's included.
    if (debounce?.mode === 'extend') delayMs = options.dedup.delayMs!;
  }

  if (merged.deadLetterQueue !== undefined && merged.deadLetterQueue === queue) {
    fail(where, 'deadLetterQueue', `is the job's own queue "${queue}"; a dead letter must go elsewhere, or leave it unset`);
  }

  const baseMs = merged.backoff?.baseMs ?? columns.backoffBaseMs;
  const maxMs = merged.backoff?.maxMs ?? columns.backoffMaxMs;
  const meta = options.meta === undefined ? '{}' : `{"${RUNTIME_META_KEY}":${toJsonObject(where, 'meta', options.meta, LIMITS.metaBytes)}}`;

  return {
    queue,
    task,
    args: toJsonObject(where, 'args', args === undefined ? {} : args, LIMITS.argsBytes),
    meta,
    tenant_id: tenantId,
    priority: merged.priority ?? columns.priority,
    destination,
    run_at: runAt,
    delay_ms: delayMs,
    expire_seconds: merged.expireSeconds ?? columns.expireSeconds,
    max_attempts: merged.maxAttempts ?? columns.maxAttempts,
    ...backoffBaseColumns(baseMs),
    backoff_max_ms: maxMs,
    max_interruptions: merged.maxInterruptions ?? columns.maxInterruptions,
    max_deferrals: merged.maxDeferrals ?? columns.maxDeferrals,
    dedup_scope: dedupScope === null ? null : toStoredDedupScope(dedupScope),
    dedup_period: dedupPeriod,
    dead_letter_queue: merged.deadLetterQueue ?? null,
    remove_on_complete: merged.removeOnComplete ?? false,
    ordering_key: orderingKey,
    ...(debounce && { debounce }),
  };
}

/** The dedup option's mode, checked with the delays that go with it: undefined for `keep`, which changes nothing. */
function debounceOf(where: string, options: EnqueueOptions): Debounce | undefined {
  const { mode = 'keep', delayMs, maxDelayMs } = options.dedup!;
  if (!DEDUP_MODES.includes(mode)) fail(where, 'dedup.mode', `must be one of ${DEDUP_MODES.join(', ')}, got ${describe(mode)}`);
  const milliseconds = (option: string, value: unknown) => {
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0)
      fail(where, option, `must be a finite number of milliseconds, 0 or more, got ${describe(value)}`);
    return value;
  };
  // A follow-up waits behind its scope's running job outside every line of jobs; a key's order would make it wait twice.
  if (mode !== 'keep' && options.orderingKey !== undefined) {
    fail(
      where,
      'orderingKey',
      `cannot be set with dedup mode '${mode}', whose scope already runs one job at a time with the newest request behind it; use mode 'keep' to keep a key's order`,
    );
  }
  if (mode !== 'extend') {
    if (delayMs !== undefined) fail(where, 'dedup.delayMs', `is only read with mode 'extend' (mode is '${mode}'); use the job's own delayMs`);
    if (maxDelayMs !== undefined) fail(where, 'dedup.maxDelayMs', `is only read with mode 'extend' (mode is '${mode}')`);
    return mode === 'keep' ? undefined : { mode, maxDelayMs: null };
  }
  if (delayMs === undefined) fail(where, 'dedup.delayMs', "is needed with mode 'extend': how long after the newest request the job runs");
  if (options.runAt !== undefined || options.delayMs !== undefined) {
    fail(where, options.runAt !== undefined ? 'runAt' : 'delayMs', "cannot be set with dedup mode 'extend', whose dedup.delayMs sets the run time");
  }
  milliseconds('dedup.delayMs', delayMs);
  if (maxDelayMs === undefined) return { mode, maxDelayMs: null };
  milliseconds('dedup.maxDelayMs', maxDelayMs);
  if (maxDelayMs < delayMs) fail(where, 'dedup.maxDelayMs', `must be at least dedup.delayMs (${delayMs}), got ${maxDelayMs}`);
  return { mode, maxDelayMs };
}

/**
 * A backoff base as the two columns that store it (migration 8): the seed's
 * smallint backoff_base_ms holds a base of up to 32,767 ms, and a longer one
 * goes whole to backoff_base_wide_ms, with backoff_base_ms at its largest so
 * that a runtime that reads only the seed's column backs off as long as it
 * can. The job mapper reads the base back as the first that is not NULL.
 */
export function backoffBaseColumns(baseMs: number): Pick<JobRow, 'backoff_base_ms' | 'backoff_base_wide_ms'> {
  return baseMs > LIMITS.smallint.max
    ? { backoff_base_ms: LIMITS.smallint.max, backoff_base_wide_ms: baseMs }
    : { backoff_base_ms: baseMs, backoff_base_wide_ms: null };
}

/**
 * A job's meta text with a key of this runtime's own set under meta.nestjs,
 * beside what the enqueue's `meta` option put there, without parsing either:
 * `meta` is the text buildJobRow wrote, `{}` or `{"nestjs":{...}}`, and
 * `json` is already JSON. A key of the same name in the user's own meta is
 * written after ours and is the one kept, as jsonb keeps the last of
 * duplicate keys: what a user stores is never overwritten.
 */
export function withRuntimeMetaKey(meta: string, key: string, json: string): string {
  const own = `{"${RUNTIME_META_KEY}":{`;
  if (meta === '{}') return `${own}${JSON.stringify(key)}:${json}}}`;
  if (!meta.startsWith(own)) throw new Error(META_NOT_BUILT_BY_RUNTIME(meta));
  const rest = meta.slice(own.length);
  return `${own}${JSON.stringify(key)}:${json}${rest.startsWith('}') ? '' : ','}${rest}`;
}

/**
 * The schema's dedup_key hashes `dedup_scope::bytea`, and that cast reads
 * backslashes as escapes: a scope with a lone backslash would fail the
 * enqueue ("invalid input syntax for type bytea"), and "\x41" would hash as
 * "A", so two different scopes would share one key. Stored with each
 * backslash doubled, the cast reads back exactly the scope's own bytes; a
 * scope without a backslash is stored as it is, so existing keys are
 * unchanged.
 */
export function toStoredDedupScope(scope: string): string {
  return scope.replace(/\\/g, '\\\\');
}

/** The scope as the user gave it, from the stored column. */
export function fromStoredDedupScope(stored: string | null): string | null {
  return stored === null ? null : stored.replace(/\\\\/g, '\\');
}
