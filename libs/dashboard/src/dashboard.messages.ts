// Every error the dashboard and the CLI raise says what was wrong and what to do.

export const AUTH_REQUIRED = () =>
  `StampededDashboardModule.forRoot() needs an auth setting: the dashboard can retry, cancel and discard jobs, ` +
  `so it is closed by default. Pass auth: { username, password } for basic auth, a guard class (CanActivate), ` +
  `or a function (request) => boolean.`;

export const BAD_AUTH = (got: string) =>
  `StampededDashboardModule.forRoot(): auth must be { username, password }, a guard class or a function (request) => boolean; got ${got}.`;

export const BAD_PATH = (path: unknown) => `StampededDashboardModule.forRoot(): path must be a URL path such as '/stampeded', got ${JSON.stringify(path)}.`;

export const UNKNOWN_DASHBOARD_OPTIONS = (unknown: string[], allowed: readonly string[]) =>
  `StampededDashboardModule.forRoot(): unknown option(s) ${unknown.join(', ')}. Allowed: ${allowed.join(', ')}.`;

export const CSRF_REJECTED = () =>
  `This action needs the dashboard's CSRF token (header x-stampeded-csrf, or form field _csrf) matching its cookie. ` +
  `Reload the dashboard page, or GET <path>/api/csrf first when scripting the API.`;

export const READ_ONLY = () => `The dashboard is read-only (readOnly: true): no job, queue or schedule can be changed from it.`;

export const JOB_NOT_FOUND = (id: string) => `No job with id ${id}. It may have been pruned after finishing.`;

export const NOT_A_JOB_ID = (id: string) => `${JSON.stringify(id)} is not a job id (a UUID).`;

export const NOT_A_WORKFLOW_ID = (id: string) => `${JSON.stringify(id)} is not a workflow id (a UUID, as enqueueWorkflow() returned it).`;

export const WORKFLOW_NOT_FOUND = (id: string) => `No workflow with id ${id}. The workflows page lists them.`;

export const BAD_WORKFLOW_LIMIT = (value: unknown) => `limit must be a whole number from 1 to 1000; got ${JSON.stringify(value)}.`;

export const SCHEDULE_NOT_FOUND = (key: string) => `No schedule with key ${JSON.stringify(key)}. List them with \`stampeded schedules list\`.`;

export const BAD_FILTER = (name: string, value: string, allowed: readonly string[]) =>
  `${name} must be one of ${allowed.join(', ')}; got ${JSON.stringify(value)}.`;

export const BAD_SCAN = (value: string, max: number) =>
  `scan is how many jobs a page of a filter without an index may read: a whole number from 1 to ${max.toLocaleString('en')}; got ${JSON.stringify(value)}.`;

export const BAD_ID_FILTER = (value: string) =>
  `id must be a job's id (a UUID) or its last characters as the jobs list shows them (4 or more hex digits, such as e02e15ff571a); got ${JSON.stringify(value)}.`;

export const BAD_FINGERPRINT_FILTER = (value: string) =>
  `fingerprint must be an error fingerprint's first 8 to 64 hex digits, as the errors page shows it; got ${JSON.stringify(value)}.`;

export const BAD_JSON_FILTER = (name: string, value: string) =>
  `${name} must be a JSON object the job's ${name} contain, such as {"orderId": 42}; got ${JSON.stringify(value)}.`;

export const BAD_CURSOR = () => `The page cursor is not one this dashboard wrote: start again from the first page.`;

export const NOT_ACTIONABLE = (action: string, id: string, state: string) => `Job ${id} is ${state}: ${action} does nothing to a job in that state.`;

export const BAD_BULK_ACTION = (action: string, allowed: readonly string[]) => `No bulk action ${JSON.stringify(action)}: use one of ${allowed.join(', ')}.`;

export const BAD_BULK_NUMBER = (name: string, value: unknown, max: number) =>
  `${name} must be a whole number from 1 to ${max.toLocaleString('en')}; got ${JSON.stringify(value)}.`;

export const BAD_REFRESH_SECONDS = (value: unknown) =>
  `StampededDashboardModule.forRoot(): refreshSeconds must be a whole number of 0 or more (0 turns the pages' refresh off), got ${JSON.stringify(value)}.`;

export const UNKNOWN_ACTION = (of: 'job' | 'queue' | 'schedule', action: string, allowed: readonly string[]) =>
  `No ${of} action ${JSON.stringify(action)}: use one of ${allowed.join(', ')}.`;

export const HEALTH_NO_ANSWER = (ms: number) =>
  `the database gave no answer within ${ms} ms: check that it is up and not overloaded (connections, locks, long queries).`;

/** Why health says degraded about the replica, or undefined when it is well. */
export const REPLICA_DEGRADED = (replica: { readingFrom: string; lagSeconds: number | null; error?: string }, maxLagSeconds: number) =>
  replica.readingFrom === 'primary'
    ? `the replica (readConnection) does not answer${replica.error ? ` (${replica.error})` : ''}: the dashboard and metrics read the primary`
    : replica.lagSeconds !== null && replica.lagSeconds > maxLagSeconds
      ? `the replica (readConnection) is ${Math.round(replica.lagSeconds)} s behind the primary, over maxReplicaLagSeconds (${maxLagSeconds} s)`
      : undefined;

export const UNKNOWN_HEALTH_INSTANCE = (instance: string, known: readonly string[]) =>
  `StampededHealthIndicator: the app has no Stampeded instance "${instance}" (it has ${known.map((k) => `"${k}"`).join(', ')}). ` +
  `Name one of those, or check the name given to StampededModule.forRoot({ name }).`;

export const NO_DEFAULT_HEALTH_INSTANCE = (key: string, known: readonly string[]) =>
  `StampededHealthIndicator: isHealthy() names no instance, so it checks the default one, but this app has no default instance ` +
  `(it has ${known.map((k) => `"${k}"`).join(', ')}). Check them all with eachInstance('${key}'), or one with isHealthy('${key}', { instance: '${known[0]}' }).`;

export const NO_STAMPEDED = (what: string) =>
  `${what} reads Stampeded's database, but the app declares no Stampeded instance: import StampededModule.forRoot(...) beside it.`;

export const BAD_POLICY = (problem: string) => `${problem} Nothing was written: correct the value and save again (empty, or none, for no limit).`;

export const BREAKER_NOT_FOUND = (destination: string) =>
  `No circuit breaker for destination ${JSON.stringify(destination)}: a breaker exists once a job for it has failed or it was opened by hand. The queue page lists them.`;

export const UNKNOWN_DASHBOARD_INSTANCE = (instance: string, known: readonly string[]) =>
  `No Stampeded instance "${instance}" in this app: it has ${known.map((k) => `"${k}"`).join(', ')}. Pick one in the dashboard's instance switcher.`;

export const BAD_INSIGHTS_RANGE = (value: unknown, allowed: readonly string[]) =>
  `range must be one of ${allowed.join(', ')} (the last hour, day or week); got ${JSON.stringify(value)}.`;
