// Every error @stampeded/testing raises says what was wrong and what to do.

export const EMBEDDED_START_TIMED_OUT = (ms: number) =>
  `embedded PostgreSQL did not start within ${ms} ms. A busy machine starts it slower: raise startTimeoutMs, or set DATABASE_URL to a server of your own.`;

export const EMBEDDED_START_FAILED = (reason: string | undefined) =>
  `embedded PostgreSQL failed to start: ${reason ?? 'no reason given'}. Check the disk space and the permissions of its data directory ` +
  `(as root it needs createPostgresUser), or set DATABASE_URL to a server of your own.`;

export const EMBEDDED_EXITED = (code: number | null) =>
  `embedded PostgreSQL exited before it was ready (exit code ${code}). Its log above says why; or set DATABASE_URL to a server of your own.`;

export const EMBEDDED_RESTART_FAILED = (reason: string | undefined) =>
  `embedded PostgreSQL did not restart: ${reason ?? 'no reason given'}. The server is stopped: start another with startPostgres().`;

export const NOT_A_DATE = (where: string, got: unknown) =>
  `${where}: ${JSON.stringify(got)} is not a date. Give a Date, an ISO 8601 string such as '2030-01-01T09:00:00Z', or epoch milliseconds.`;

export const NOT_A_DURATION = (got: string) =>
  `TestClock.advance(): ${JSON.stringify(got)} is not a duration. Give milliseconds, or units of ms, s, m, h and d such as '90s', '1h' or '1h30m'.`;

export const NOT_ENQUEUED = (expected: string, matching: string, found: number, states: readonly string[], enqueued: string[]) =>
  `Expected ${expected} job(s) matching ${matching}, found ${found}. ` + `Enqueued (${states.join('/')}): ${enqueued.length ? enqueued.join('; ') : 'none'}.`;

export const BAD_STATES = (where: string, got: string, states: readonly string[]) =>
  `${where}: states must be some of ${states.join(', ')}; got ${JSON.stringify(got)}.`;
