// Every error the CLI prints is one line that says what was wrong and what to do.

export const NO_URL = () => `No database given: set DATABASE_URL or pass --url postgres://user:password@host:5432/db.`;

export const NO_INSTANCE_URL = (instance: string, variable: string) =>
  `No database given for the instance "${instance}": set ${variable} (the instance's own DATABASE_URL) or pass --url postgres://user:password@host:5432/db.`;

export const BAD_URL = (url: string) => `${url} is not a PostgreSQL connection URL: expected postgres://user:password@host:5432/db.`;

export const CANNOT_CONNECT = (where: string, why: string) =>
  `Cannot connect to PostgreSQL at ${where}: ${why}. Check DATABASE_URL or --url, and that the server is running.`;

export const AUTH_FAILED = (where: string) =>
  `PostgreSQL at ${where} refused the login: wrong user or password. Check the credentials in DATABASE_URL or --url.`;

export const NO_DATABASE = (where: string, db: string) =>
  `PostgreSQL at ${where} has no database named "${db}". Create it, or fix the database name in DATABASE_URL or --url.`;

/** `oldestNum` is the core's REQUIRED_SERVER_VERSION_NUM (140000 for PostgreSQL 14). */
export const SERVER_TOO_OLD = (found: string, oldestNum: number) =>
  `Stampeded needs PostgreSQL ${Math.floor(oldestNum / 10000)} or newer, but the server is PostgreSQL ${found}. ` +
  `Point DATABASE_URL at a PostgreSQL ${Math.floor(oldestNum / 10000)} to 18 server. Nothing was changed.`;

export const NOT_INSTALLED = (schema: string) =>
  `Stampeded is not installed in schema "${schema}" of this database. Run \`stampeded migrate --schema ${schema}\`, or pass the --schema it was installed in.`;

export const JOB_NOT_FOUND = (id: string) => `No job with id ${id}. It may have been pruned after finishing.`;

export const WORKFLOW_NOT_FOUND = (id: string) => `No workflow with id ${id}. List them with \`stampeded workflows list\`.`;

export const SCHEDULE_NOT_FOUND = (key: string) => `No schedule with key "${key}". List them with \`stampeded schedules list\`.`;

export const NOT_CHANGED = (action: string, id: string, state: string) => `Job ${id} is ${state}: ${action} did nothing to it.`;

export const BAD_NUMBER = (option: string, value: string) => `${option} must be a whole number of 1 or more; got "${value}".`;

export const NOT_ADOPTED = (schema: string) =>
  `Schema "${schema}" holds Stampeded's tables, but no Stampeded migration is recorded there: another runtime installed the "stampeded 0.3.1" schema. ` +
  `Run \`stampeded migrate --schema ${schema}\` once: it checks that it is that schema, records it as migration 1 and applies the rest.`;

export const PROGRAM_WITHOUT_IO = () =>
  `stampeded: the program was built without its io: build it with buildProgram(io), which gives each command its output streams and environment.`;

export const ENCRYPTION_KEYS_NEEDED = () =>
  `stampeded encryption rotate needs the keys: pass --keys-file <path>, or set STAMPEDED_ENCRYPTION_KEYS, to JSON of the shape ` +
  `{ "keys": { "k2": "<32 bytes, base64>", "k1": "..." }, "current": "k2" } (docs/encryption.md).`;

export const ENCRYPTION_KEYS_UNREADABLE = (source: string, why: string) =>
  `${source} could not be read as the keys' JSON: ${why}. Give { "keys": { "<id>": "<base64>" }, "current": "<id>" }.`;

export const POLICY_NOTHING_GIVEN = (queue: string) =>
  `Nothing to change: pass --max-running N and/or --max-wait-secs N (none for no limit), e.g. \`stampeded queues policy ${queue} --max-running 10\`.`;

export const BREAKER_NOT_FOUND = (destination: string) => `No circuit breaker for destination "${destination}". List them with \`stampeded breakers list\`.`;
