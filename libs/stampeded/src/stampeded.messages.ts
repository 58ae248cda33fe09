import { inspect } from 'node:util';
import { REQUIRED_SERVER_VERSION_NUM } from './stampeded.constants.js';

// Every error Stampeded raises says what was wrong and what to do about it.

export * from './encryption/encryption.messages.js';
export * from './instances/instance.messages.js';
export * from './workflows/workflow.messages.js';

/** The oldest PostgreSQL major Stampeded runs on, as the server check reads it. */
const OLDEST_MAJOR = Math.floor(REQUIRED_SERVER_VERSION_NUM / 10000);

export const SERVER_TOO_OLD = (found: string) =>
  `Stampeded needs PostgreSQL ${OLDEST_MAJOR} or newer, but the server is PostgreSQL ${found}. ` +
  `Upgrade the server, or point DATABASE_URL at a PostgreSQL ${OLDEST_MAJOR} or newer instance. Nothing was changed.`;

export const NO_DATA_SOURCE = (name: string | undefined) =>
  `StampededModule found no TypeORM DataSource${name ? ` named "${name}"` : ''}. ` +
  `Import TypeOrmModule.forRoot({ type: 'postgres', ... })${name ? ` with name: '${name}'` : ''} in your app, ` +
  `or give StampededModule.forRoot({ connection: { url } }) a connection of its own.`;

export const NOT_POSTGRES = (type: string) =>
  `Stampeded needs a PostgreSQL DataSource, but the DataSource is of type "${type}". ` +
  `Give it one of type 'postgres' on PostgreSQL ${OLDEST_MAJOR} or newer (the dataSource option names it), or give StampededModule a connection of its own.`;

export const NO_WRITABLE_HOST = (reasons: readonly string[]) =>
  `None of the database hosts takes writes (${reasons.join('; ')}). ` +
  `During a failover this lasts until the standby is promoted; otherwise check the hosts given to writableHostClient().`;

export const NO_CURRENT_SCHEMA = () =>
  `The connection has no current schema: its search_path names no schema that exists. Pass the schema to install into ({ schema: 'jobs' }), or fix the search_path.`;

export const UNSUPPORTED_SCHEMA_NAME = (schema: unknown) =>
  `Schema name ${JSON.stringify(schema)} is not supported: use a plain lower-case identifier ` +
  `(a-z, 0-9, "_", not starting with a digit, at most 63 bytes), one PostgreSQL never needs quoted.`;

export const FUNCTION_FORM_WITHOUT_BASE = (file: string, base: string) =>
  `The function file ${file} has no ${base}.sql beside it: a form for older servers goes beside the form for the newest. Add ${base}.sql, or rename the file.`;

export const FUNCTION_BLOCK_MISSING = (file: string, name: string) =>
  `The function file ${file} names the block {{${name}}}, and sql/functions/blocks/ has no ${name}.sql. Add the block's file, or correct the name.`;

export const MIGRATION_NOT_REVERSIBLE = (className: string) =>
  `${className} cannot be reverted: Stampeded's migrations only go forward. ` +
  `To remove Stampeded, drop its schema (DROP SCHEMA ... CASCADE) after draining its jobs.`;

export const SCHEMA_NOT_MIGRATED = (schema: string) =>
  `Stampeded's tables are not in schema "${schema}". Run its migrations first: ` +
  `StampededModule.forRoot({ migrations: 'auto' }), the migrate() helper, the \`stampeded migrate\` command, ` +
  `or add stampededMigrations() to your DataSource's migrations.`;

export const SCHEMA_BEHIND = (schema: string, pending: { migrations: { version: number; name: string }[]; functions: string[] }) =>
  `Schema "${schema}" is behind this version of Stampeded: ` +
  [
    pending.migrations.length ? `migration(s) ${pending.migrations.map((m) => `${m.version} (${m.name})`).join(', ')} not applied` : '',
    pending.functions.length ? `function(s) ${pending.functions.join(', ')} not at this version's definition` : '',
  ]
    .filter(Boolean)
    .join('; ') +
  `. Run the pending migrations (migrations: 'auto', migrate(), \`stampeded migrate\`, or your DataSource's migrations with stampededMigrations()).`;

export const SEED_INSTALL_DIFFERS = (schema: string, differences: string[], listed: number) =>
  `Schema "${schema}" holds Stampeded tables or functions that no Stampeded migration recorded (an install of the ` +
  `"stampeded 0.3.1" schema made by another runtime?), but they are not exactly that schema, so they were not adopted as migration 1 ` +
  `and nothing was changed. Make them match it (restore what is missing or changed from the seed's SQL, ` +
  `dist/sql/migrations/0001_seed.sql in @stampeded/nestjs; drop what is not the seed's) and migrate again, or install Stampeded ` +
  `in a schema of its own (the schema option). What differs:\n` +
  differences
    .slice(0, listed)
    .map((d) => `  - ${d}`)
    .join('\n') +
  (differences.length > listed ? `\n  ... and ${differences.length - listed} more` : '');

export const SEED_NOT_ADOPTED = (schema: string) =>
  `Schema "${schema}" holds Stampeded's tables, but no Stampeded migration is recorded there: another runtime installed the ` +
  `"stampeded 0.3.1" schema. Run the migrations once (StampededModule.forRoot({ migrations: 'auto' }), migrate(), ` +
  `\`stampeded migrate\`, or stampededMigrations()): they check that it is that schema, record it as migration 1 and apply the rest.`;

export const UNREADABLE_COLUMN_DEFAULT = (schema: string, column: string, expression: string | undefined) =>
  `Schema "${schema}": stampeded_jobs.${column} ` +
  (expression === undefined ? 'has no default' : `has the default ${expression}, which is not an integer constant`) +
  `. Stampeded fills that column from its default when a job does not set it: restore the default the migrations give it.`;

export const DUPLICATE_TASK = (name: string, first: string, second: string) =>
  `Task "${name}" is declared twice, by ${first} and by ${second}. Task names are how jobs find their handler: give one of them another name.`;

export const TASK_WITHOUT_HANDLE = (className: string, name: string) =>
  `${className} is marked @Task('${name}') but has no handle(args, ctx) method. Add one: it is what runs the job.`;

export const CHUNK_TASK_WITHOUT_HANDLE_CHUNK = (className: string, name: string) =>
  `${className} is marked @Task('${name}', { chunk }) but has no handleChunk(jobs, ctx) method. Add one (ChunkTaskHandler): it runs the chunk's jobs.`;

export const HANDLE_CHUNK_WITHOUT_CHUNK = (className: string, name: string) =>
  `${className} has handleChunk() but @Task('${name}') has no chunk option: add chunk: { size } to run its jobs many at once, or give it handle(args, ctx).`;

export const CHUNK_NOT_WITH = (where: string, option: string, why: string) => `${where}: chunk cannot be combined with ${option}: ${why}.`;

export const CHUNK_JOB_UNKNOWN = (task: string, id: unknown) =>
  `Chunk of "${task}": ${typeof id === 'string' ? `job ${id}` : 'that value'} is not one of its jobs. Pass a job handleChunk() received.`;

export const CHUNK_OUTCOME_TWICE = (id: string, first: string) => `Job ${id} already has an outcome in its chunk (${first}): give each job one outcome.`;

export const UNKNOWN_TASK = (name: string, known: string[]) =>
  `No task named "${name}" is registered in this app${known.length ? ` (known: ${known.join(', ')})` : ''}. ` +
  `Enqueue it by name only if another process handles it, or check the name in @Task().`;

export const TASK_NAME_REQUIRED = (className: string) => `@Task() on ${className} needs a name, the one jobs are enqueued by: @Task('send-email').`;

export const INVALID_ISOLATION = (where: string, got: unknown) =>
  `${where}: isolation must be 'none' (run in this process) or 'process' (run in a child process, with processFile), got ${JSON.stringify(got)}.`;

export const NOT_A_TASK_CLASS = (className: string) => `${className} is not a task: mark it with @Task('name') or enqueue by task name.`;

export const INVALID_OPTION = (where: string, option: string, problem: string) => `${where}: ${option} ${problem}.`;

export const UNKNOWN_OPTIONS = (where: string, unknown: string[], allowed: readonly string[]) =>
  `${where}: unknown option${unknown.length > 1 ? 's' : ''} ${unknown.map((o) => `"${o}"`).join(', ')}. ` + `Allowed: ${allowed.join(', ')}.`;

export const NOT_A_WHOLE_NUMBER = (where: string, option: string, got: unknown, min: number, orElse?: string) =>
  `${where}: ${option} must be a whole number of ${min} or more${orElse ? ` or ${orElse}` : ''}, got ${inspect(got, { breakLength: Infinity })}.`;

export const INVALID_MIGRATIONS_OPTION = (where: string, got: unknown) =>
  `${where}: migrations must be 'auto' (migrate at startup) or 'none' (you migrate: migrate(), \`stampeded migrate\` or stampededMigrations()), ` +
  `got ${JSON.stringify(got)}.`;

export const INVALID_SCHEMA_OPTION = (where: string, got: unknown) =>
  `${where}: schema must be a PostgreSQL schema name of 1 to 63 characters, such as 'jobs', got ${JSON.stringify(got)}. Leave it out for public.`;

export const INVALID_CLOCK_OPTION = (where: string, got: unknown) =>
  `${where}: clock must be an object with a now() method (a TestClock from @stampeded/testing), got ${typeof got}.`;

export const ASYNC_OPTIONS_SOURCE_REQUIRED = () =>
  `StampededModule.forRootAsync() needs useFactory, useClass or useExisting: the one that provides the module's options.`;

export const RENAMED_OPTION = (where: string, old: string, renamed: string) =>
  `${where}: the option "${old}" is now "${renamed}", with the same settings. Rename it (see CHANGELOG.md).`;

export const INVALID_VALIDATE = (where: string, got: unknown) =>
  `${where}: validate must be a Standard Schema (a zod, valibot or arktype schema: an object with "~standard") ` +
  `or a function (args) => issues, got ${inspect(got, { depth: 1, breakLength: Infinity })}.`;

/** The issues of a job's args, as one line: the first ten, and how many more. */
const listIssues = (issues: readonly string[]) => issues.slice(0, 10).join('; ') + (issues.length > 10 ? `; and ${issues.length - 10} more` : '');

export const INVALID_ARGS = (where: string, task: string, issues: readonly string[]) =>
  `${where}: the args of task "${task}" fail its validate option: ${listIssues(issues)}. Nothing was written; fix the args.`;

export const INVALID_ARGS_AT_RUN = (task: string, issues: readonly string[]) =>
  `the args of task "${task}" fail its validate option: ${listIssues(issues)}. ` +
  `The job was discarded without running its handler, since no attempt can succeed with these args. ` +
  `Enqueue it again with valid args; if the validate option was what was wrong, fix it and retry the job.`;

export const INVALID_RETRY_POLICY = (where: string, got: unknown) =>
  `${where}: retryPolicy must be a function (failure) => decision or an object with a nextRetry(failure) method, got ${inspect(got, { depth: 1, breakLength: Infinity })}. ` +
  `Return { retry: true, delayMs } to run the job again, or { retry: false } to give up.`;

export const RETRY_POLICY_THREW = (task: string, jobId: string, error: string) =>
  `the retry policy of task "${task}" threw while deciding job ${jobId}; the default backoff decides instead. ` +
  `Make nextRetry() return a decision for every failure. It threw: ${error}`;

export const INVALID_RETRY_DECISION = (task: string, jobId: string, got: unknown) =>
  `the retry policy of task "${task}" answered ${inspect(got, { depth: 2, breakLength: Infinity })} for job ${jobId}; the default backoff decides instead. ` +
  `Return { retry: true, delayMs } with delayMs a finite number of milliseconds, 0 or more, or { retry: false }.`;

export const INVALID_EVENTS_OPTION = (where: string, got: unknown) =>
  `${where}: events must be 'fleet' (job events of every process of the fleet) or 'local' (only this app's own workers'), got ${inspect(got, { breakLength: Infinity })}.`;

export const INVALID_POOLER_OPTION = (where: string, got: unknown) =>
  `${where}: pooler must be 'transaction' or { mode: 'transaction', preparedStatements?: boolean } (a transaction-mode pooler such as PgBouncer's ` +
  `pool_mode = transaction), got ${inspect(got, { breakLength: Infinity })}. Leave it out for a direct connection or a session-mode pooler.`;

export const LISTEN_CONNECTION_WITHOUT_POOLER = (where: string) =>
  `${where}: listenConnection is the direct connection that listens for notifications beside a transaction-mode pooler; without pooler: 'transaction' ` +
  `Stampeded listens on its own connection already. Set pooler: 'transaction', or leave listenConnection out.`;

export const FLEET_EVENTS_NEED_LISTEN = (where: string) =>
  `${where}: events: 'fleet' hears other processes' job events by listening for notifications, which a transaction-mode pooler does not keep. ` +
  `Give listenConnection (a direct connection to the same database, e.g. { url: process.env.DIRECT_DATABASE_URL }), ` +
  `or set events: 'local' (this app's own workers' events; waitFor() still works, by polling).`;

export const INVALID_READ_CONNECTION = (where: string, got: unknown) =>
  `${where}: readConnection must name the app's TypeORM DataSource of a replica ('replica'), be that DataSource, or be connection options ({ url }), got ${inspect(got, { depth: 0, breakLength: Infinity })}.`;
export const READS_ON_PRIMARY = (reason: string, retrySeconds: number) =>
  `the replica (readConnection) does not answer (${reason}): the dashboard, metrics and getJob({ replica: true }) read the primary, and try the replica again every ${retrySeconds} s.`;

export const WAIT_TIMED_OUT = (id: string, timeoutMs: number, state: string | undefined) =>
  `waitFor(${id}): the job did not finish within ${timeoutMs} ms${state ? ` (it is ${state})` : ''}. ` +
  `Only the wait ended: the job goes on; wait again, or read it with getJob().`;

export const WAITED_JOB_GONE = (id: string) =>
  `waitFor(${id}): the job is no longer stored: removed when it completed (removeOnComplete), pruned, or deleted, ` +
  `so there is no outcome to return. Enqueue it without removeOnComplete to wait for its outcome.`;

export const WAIT_ENDED_BY_SHUTDOWN = (id: string) => `waitFor(${id}): the app is shutting down. The job goes on; getJob() reads its outcome later.`;

export const JOB_NOT_FOUND = (id: string) => `No job with id ${id}. It may have been pruned after finishing.`;

export const QUEUE_DEFAULTS_NAME_ANOTHER_QUEUE = (where: string, queue: string, got: unknown) =>
  `${where}: defaultJobOptions.queue is ${JSON.stringify(got)}, but these are the defaults of queue "${queue}": leave queue out of them, or set it to "${queue}".`;

export const CATCH_ALL_HOLDS_QUEUE_JOBS = (queue: string) =>
  `Queue "${queue}" already has jobs in the catch-all partition, so it cannot get a partition of its own now. ` +
  `Let those jobs finish and be pruned, or register the queue before enqueueing to it.`;

export const NOT_A_JOB_ID = (where: string, id: unknown) => `${where}: ${JSON.stringify(id)} is not a job id (a UUID). Pass the id enqueue() returned.`;

export const OPTIONS_NOT_OBJECT = (where: string, shape: string) => `${where}: options must be an object ${shape}.`;

export const ENQUEUE_MANY_NOT_ARRAY = (got: unknown) => `enqueueMany() takes an array of { task, args?, options? }, got ${typeof got}.`;

export const ENQUEUE_MANY_JOB_NOT_OBJECT = (where: string) => `${where}: must be an object { task, args?, options? }.`;

export const MANAGER_PER_JOB = (where: string, call: string) => `${where}: pass manager once, as ${call}, not per job.`;

export const JSONB_OVER_LIMIT = (field: 'args' | 'meta', limit: number) =>
  `enqueue: a job's ${field} is over the ${limit}-byte limit as PostgreSQL stores it (jsonb), though under it as JSON text; ` +
  `store large payloads elsewhere and pass a reference. Nothing was inserted.`;

export const DEDUP_TWIN_UNSETTLED = (count: number) =>
  `enqueue: a duplicate's twin kept changing state under it (${count} job(s)); nothing was inserted for them. Try again.`;

export const QUEUE_PARTITION_TAKEN = (queue: string, partition: string, owner: string) =>
  `Queue "${queue}" would use partition ${partition}, which already holds queue ${owner}. ` +
  `Queue names map to partition names with punctuation replaced by "_": rename one of the queues.`;

export const DEFAULT_QUEUE_PARTITION = (queue: string) =>
  `Queue "${queue}" cannot have a partition of its own: its partition name is that of the catch-all partition (stampeded_jobs_default). ` +
  `Its jobs live in the catch-all already; drop unlogged from its registration, or use another queue name.`;

export const CHECKPOINT_NOT_OWNED = (id: string) =>
  `Checkpoint of job ${id} not saved: this worker no longer owns the job (cancelled, timed out or reaped). ` +
  `Stop the work: the job's signal has fired, and another attempt starts from the last checkpoint saved.`;

export const TASK_PROCESS_EXITED = (jobId: string, status: number, signal: string | null) =>
  `task process exited with status ${status}${signal ? ` (${signal})` : ''} before finishing job ${jobId}; ` +
  `the job is retried by its policy. A signal such as SIGKILL is often the system's out-of-memory killer: give the process more memory, or do less in one job.`;

export const CHECKPOINT_TOO_LARGE = (bytes: number, max: number) =>
  `Checkpoint is ${bytes} bytes; the limit is ${max} bytes (64 KB). ` + `Store a cursor ("I have done N") rather than the set of what was done.`;

export const RESULT_TOO_LARGE = (task: string, bytes: number, max: number) =>
  `The result of task "${task}" is ${bytes} bytes as JSON; the limit is ${max} bytes (64 KB). ` +
  `Store large output elsewhere (a table of your own, object storage) and return a reference to it, ` +
  `or set storeResult: false on the task to keep results out of the job.`;

export const RESULT_NOT_STORABLE = (task: string, problem: string) =>
  `The result of task "${task}" cannot be stored: ${problem}. Return a JSON value, or set storeResult: false on the task to keep results out of the job.`;

export const PROGRESS_TOO_LARGE = (bytes: number, max: number) =>
  `Progress is ${bytes} bytes as JSON; the limit is ${max} bytes (1 KB). ` +
  `Report counts and a short stage ({ done: 40, total: 200, stage: 'upload' }); save larger state with saveCheckpoint(), or return it as the result.`;

export const PROGRESS_NOT_STORABLE = (problem: string) => `ctx.progress() takes a finite number or a plain JSON object: ${problem}. Nothing was written.`;

export const PROCESS_FILE_REQUIRED = (where: string, file: unknown) =>
  `${where}: isolation 'process' needs a processFile, the module the child process runs, ` +
  (file === undefined ? 'and none was given' : `and ${JSON.stringify(String(file))} is neither a URL nor an absolute path`) +
  `. Give it as a URL beside the task: processFile: new URL('./my-task.process.js', import.meta.url), ` +
  `a module whose default export is (args, ctx) => result.`;

export const INVALID_SCHEDULE = (key: string, field: string, problem: string) => `Schedule "${key}": ${field} ${problem}.`;

export const NO_MAINTENANCE_SERVICE = (name: string, known: readonly string[]) =>
  `No maintenance service named ${JSON.stringify(name)}: run one of ${known.join(', ')}.`;

export const LEADER_CHECK_NO_ANSWER = (ms: number) =>
  `no answer within ${ms} ms (a half-open connection, or an overloaded server): the connection is dropped and a new one contests the lead`;

export const META_NOT_BUILT_BY_RUNTIME = (meta: string) =>
  `a job's meta is not as buildJobRow writes it (${meta.slice(0, 40)}...): this is a bug in Stampeded, please report it with this message.`;

export const INVALID_MAINTENANCE_OPTION = (option: string, problem: string) => `StampededModule.forRoot(): maintenance.${option} ${problem}.`;

export const INVALID_SCHEDULES_OPTION = (option: string, problem: string) => `StampededModule.forRoot(): schedules.${option} ${problem}.`;

export const SCHEDULE_NOT_FOUND = (key: string) =>
  `No schedule with key "${key}". List the schedules with SchedulesService.list(), or create it with upsert().`;

export const INVALID_CONTROL_OPTION = (option: string, problem: string) => `StampededModule.forRoot(): control.${option} ${problem}.`;

export const BREAKER_IS_OPEN = (destination: string, waitMs: number, reason: string | null) =>
  `circuit breaker for destination "${destination}" is open${reason ? ` (${reason})` : ''}; ` +
  `the job was not run and is deferred ${Math.round(waitMs)} ms, to the end of the cooldown. Its attempt is refunded.`;

export const TENANT_OVER_SHARE = (tenant: string, running: number, share: number) =>
  `tenant "${tenant}" already has ${running} job(s) running, its share is ${share} while other tenants wait; ` +
  `the job was given back and runs when the tenant is under its share. Its attempt is refunded.`;

export const QUEUE_NAME_REQUIRED = (what: string) => `${what}: give the queue's name, a non-empty string.`;

export const PAUSED_BY_REQUIRED = (what: string) => `${what}: say who pauses the queue, as { by: "name" } (a non-empty string).`;

export const PAUSE_REASON_NOT_TEXT = (what: string, reason: unknown) =>
  `${what}: reason must be a string saying why the queue is paused, got ${JSON.stringify(reason)}.`;

export const DESTINATION_REQUIRED = (what: string) => `${what}: give the destination, a non-empty string.`;

export const INVALID_TRACING_OPTION = (option: string, problem: string) => `StampededModule.forRoot(): tracing${option ? `.${option}` : ''} ${problem}.`;

export const OTEL_API_MISSING = (reason: string) =>
  `StampededModule.forRoot(): tracing is set, but @opentelemetry/api could not be loaded (${reason}). ` +
  `Install it (npm install @opentelemetry/api) with an OpenTelemetry SDK, or leave tracing unset to trace only when it is installed.`;

export const REDRIVE_UNKNOWN_QUEUE = (where: string, queue: string, deadLetterQueues: string[]) =>
  `${where}: no job has ever been in queue "${queue}", so it holds no dead letters. ` +
  (deadLetterQueues.length ? `Queues holding dead-letter copies now: ${deadLetterQueues.join(', ')}. ` : `No queue holds dead-letter copies now. `) +
  `Give the dead-letter queue's name, as a task's deadLetterQueue option sets it. Nothing was changed.`;

export const CLAIM_CURSOR_HELD = (queue: string, tookMs: number, taken: number, holder: { pid: number; application: string; state: string; seconds: number }) =>
  `claims of queue "${queue}" are slow (${Math.round(tookMs)} ms for ${taken} job(s)): pid ${holder.pid} (${holder.application}, ${holder.state}) ` +
  `has held a snapshot for ${Math.round(holder.seconds)} s, and PostgreSQL keeps every row version that snapshot could see, so each claim walks ` +
  `the dead entries of the jobs claimed since. End that transaction (idle_in_transaction_session_timeout and statement_timeout bound them). ` +
  `Meanwhile claims start where the last one ended, with a full claim beside them every second or so.`;

export const CLAIM_CURSOR_ON = (queue: string, tookMs: number, taken: number) =>
  `claims of queue "${queue}" are slow (${Math.round(tookMs)} ms for ${taken} job(s)): claiming from where the last claim ended, ` +
  `with a full claim beside it every second or so, until full claims are fast again.`;

export const CLAIM_CURSOR_OFF = (queue: string) => `claims of queue "${queue}" are fast again: claiming from the head of the queue.`;

export const LOST_CLAIMS_GIVEN_BACK = (count: number) =>
  `giving back ${count} job(s) the database says this worker holds and it does not (a claim's answer lost with its connection, or an outcome lost in a failover); they keep their attempt`;
export const LOST_RUNS_STOPPED = (count: number) =>
  `stopping ${count} running job(s) the database no longer says this worker holds (a claim lost in a failover, or the job given away): their outcomes would be fenced off`;

export const LATE_STARTS_GIVEN_BACK = (queue: string, count: number, graceMs: number) =>
  `${count} job(s) of rate-limited queue "${queue}" could not start within ${graceMs} ms of their claim and were given back, ` +
  `without spending an attempt, to keep the limit where the handlers start. They used room in the window: ` +
  `a busy event loop or a slow args validator here lowers the queue's rate.`;
