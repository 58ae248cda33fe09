import { inspect } from 'node:util';

// Every error Stampeded raises says what was wrong and what to do about it.

export const SERVER_TOO_OLD = (found: string) =>
  `Stampeded needs PostgreSQL 14 or newer, but the server is PostgreSQL ${found}. ` +
  `Upgrade the server, or point DATABASE_URL at a PostgreSQL 14 to 18 instance. Nothing was changed.`;

export const NO_DATA_SOURCE = (name: string | undefined) =>
  `StampededModule found no TypeORM DataSource${name ? ` named "${name}"` : ''}. ` +
  `Import TypeOrmModule.forRoot({ type: 'postgres', ... })${name ? ` with name: '${name}'` : ''} in your app, ` +
  `or give StampededModule.forRoot({ connection: { url } }) a connection of its own.`;

export const NOT_POSTGRES = (type: string) =>
  `StampededModule needs a PostgreSQL DataSource, but the DataSource is of type "${type}". Point it at PostgreSQL 18.`;

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

export const UNKNOWN_TASK = (name: string, known: string[]) =>
  `No task named "${name}" is registered in this app${known.length ? ` (known: ${known.join(', ')})` : ''}. ` +
  `Enqueue it by name only if another process handles it, or check the name in @Task().`;

export const NOT_A_TASK_CLASS = (className: string) => `${className} is not a task: mark it with @Task('name') or enqueue by task name.`;

export const INVALID_OPTION = (where: string, option: string, problem: string) => `${where}: ${option} ${problem}.`;

export const UNKNOWN_OPTIONS = (where: string, unknown: string[], allowed: readonly string[]) =>
  `${where}: unknown option${unknown.length > 1 ? 's' : ''} ${unknown.map((o) => `"${o}"`).join(', ')}. ` + `Allowed: ${allowed.join(', ')}.`;

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

export const WAIT_TIMED_OUT = (id: string, timeoutMs: number, state: string | undefined) =>
  `waitFor(${id}): the job did not finish within ${timeoutMs} ms${state ? ` (it is ${state})` : ''}. ` +
  `Only the wait ended: the job goes on; wait again, or read it with getJob().`;

export const WAITED_JOB_GONE = (id: string) =>
  `waitFor(${id}): the job is no longer stored: removed when it completed (removeOnComplete), pruned, or deleted, ` +
  `so there is no outcome to return. Enqueue it without removeOnComplete to wait for its outcome.`;

export const WAIT_ENDED_BY_SHUTDOWN = (id: string) => `waitFor(${id}): the app is shutting down. The job goes on; getJob() reads its outcome later.`;

export const JOB_NOT_FOUND = (id: string) => `No job with id ${id}. It may have been pruned after finishing.`;

export const QUEUE_PARTITION_TAKEN = (queue: string, partition: string, owner: string) =>
  `Queue "${queue}" would use partition ${partition}, which already holds queue ${owner}. ` +
  `Queue names map to partition names with punctuation replaced by "_": rename one of the queues.`;

export const DEFAULT_QUEUE_PARTITION = (queue: string) =>
  `Queue "${queue}" cannot have a partition of its own: its partition name is that of the catch-all partition (stampeded_jobs_default). ` +
  `Its jobs live in the catch-all already; drop unlogged from its registration, or use another queue name.`;

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

export const WORKFLOW_EMPTY = (where: string) => `${where}: a workflow needs at least one job in \`jobs\`. Nothing was enqueued.`;

export const WORKFLOW_TOO_LARGE = (where: string, count: number, max: number) =>
  `${where}: ${count} jobs is more than one workflow takes (${max}). Split it into workflows of ${max} jobs or fewer, ` +
  `or chain them: the last job of one can enqueue the next. Nothing was enqueued.`;

export const WORKFLOW_BAD_NAME = (where: string, value: string) =>
  `${where}: each job needs a \`name\`, a non-empty string of 200 characters or fewer that is unique in the workflow, got ${value}. ` + `Nothing was enqueued.`;

export const WORKFLOW_DUPLICATE_NAME = (where: string, name: string, first: number, second: number) =>
  `${where}: jobs #${first} and #${second} are both named ${JSON.stringify(name)}; ` +
  `a name says which job dependsOn means, so each must be unique in the workflow. Nothing was enqueued.`;

export const WORKFLOW_UNKNOWN_DEPENDENCY = (where: string, job: string, dependency: string) =>
  `${where}: job ${JSON.stringify(job)} depends on ${JSON.stringify(dependency)}, which is not a job of this workflow. ` +
  `dependsOn names jobs of the same call: add that job, or fix the name. Nothing was enqueued.`;

export const WORKFLOW_BAD_DEPENDENCY = (where: string, job: string, problem: string) =>
  `${where}: job ${JSON.stringify(job)}: dependsOn ${problem}. ` + `Each entry is a job's name, or { name, ignoreFailure? }. Nothing was enqueued.`;

export const WORKFLOW_CYCLE = (where: string, cycle: string[]) =>
  `${where}: the jobs wait for each other in a cycle (${cycle.map((n) => JSON.stringify(n)).join(' -> ')}), so none of them could ever run. ` +
  `A workflow's dependencies must form a DAG: remove one of these dependencies. Nothing was enqueued.`;

export const WORKFLOW_NOT_FOUND = (id: string) =>
  `No workflow with id ${id}. It may have been pruned with its jobs, or the id belongs to a job: a job's workflow is in getWorkflow(id) of its workflow id.`;

export const NOT_IN_WORKFLOW = (id: string, method: string) =>
  `ctx.${method}() in job ${id}: this job is not part of a workflow or batch, so it has nothing to read. ` +
  `Enqueue it with enqueueWorkflow(), enqueueFlow() or enqueueBatch().`;

export const CLAIM_CURSOR_HELD = (queue: string, tookMs: number, taken: number, holder: { pid: number; application: string; state: string; seconds: number }) =>
  `claims of queue "${queue}" are slow (${Math.round(tookMs)} ms for ${taken} job(s)): pid ${holder.pid} (${holder.application}, ${holder.state}) ` +
  `has held a snapshot for ${Math.round(holder.seconds)} s, and PostgreSQL keeps every row version that snapshot could see, so each claim walks ` +
  `the dead entries of the jobs claimed since. End that transaction (idle_in_transaction_session_timeout and statement_timeout bound them). ` +
  `Meanwhile claims start where the last one ended, with a full claim beside them every second or so.`;

export const CLAIM_CURSOR_ON = (queue: string, tookMs: number, taken: number) =>
  `claims of queue "${queue}" are slow (${Math.round(tookMs)} ms for ${taken} job(s)): claiming from where the last claim ended, ` +
  `with a full claim beside it every second or so, until full claims are fast again.`;

export const CLAIM_CURSOR_OFF = (queue: string) => `claims of queue "${queue}" are fast again: claiming from the head of the queue.`;

export const LATE_STARTS_GIVEN_BACK = (queue: string, count: number, graceMs: number) =>
  `${count} job(s) of rate-limited queue "${queue}" could not start within ${graceMs} ms of their claim and were given back, ` +
  `without spending an attempt, to keep the limit where the handlers start. They used room in the window: ` +
  `a busy event loop or a slow args validator here lowers the queue's rate.`;
