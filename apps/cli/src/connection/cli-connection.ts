import { StampededInspector } from '@stampeded/dashboard/inspector';
import { REQUIRED_SERVER_VERSION_NUM } from '@stampeded/nestjs/internal';
import { CliDatabase } from './cli-database.js';
import { AUTH_FAILED, BAD_URL, CANNOT_CONNECT, NOT_ADOPTED, NOT_INSTALLED, NO_DATABASE, NO_URL, SERVER_TOO_OLD } from '../cli.messages.js';
import { CliError, EXIT } from './cli-errors.js';

export interface ConnectionOptions {
  url?: string;
  schema: string;
  io: { env: Record<string, string | undefined> };
}

export interface CliConnection {
  db: CliDatabase;
  inspector: StampededInspector;
  close(): Promise<void>;
}

/** The URL to use, from --url or DATABASE_URL, checked for shape before anything connects. */
export function resolveUrl(options: ConnectionOptions): URL {
  const raw = options.url ?? options.io.env.DATABASE_URL;
  if (!raw) throw new CliError(NO_URL(), EXIT.usage);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new CliError(BAD_URL(redact(raw)), EXIT.usage);
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') throw new CliError(BAD_URL(redact(raw)), EXIT.usage);
  return url;
}

/**
 * Connects, and refuses in one line anything that would make every later
 * statement fail: an unreachable server, a refused login, a server older than
 * 18, or (unless `installed: false`) a schema without Stampeded in it.
 */
export async function connect(options: ConnectionOptions, check: { installed?: boolean } = {}): Promise<CliConnection> {
  const url = resolveUrl(options);
  const db = new CliDatabase(url.toString(), options.schema);
  const close = () => db.close();
  try {
    await assertUsable(db, url, options.schema, check.installed ?? true);
  } catch (err) {
    await close().catch(() => {});
    throw err;
  }
  return { db, inspector: new StampededInspector(db), close };
}

async function assertUsable(db: CliDatabase, url: URL, schema: string, mustBeInstalled: boolean): Promise<void> {
  let row: { num: number; version: string; installed: boolean; recorded: boolean };
  try {
    [row] = await db.raw(
      `SELECT current_setting('server_version_num')::int AS num, current_setting('server_version') AS version,
              to_regclass(format('%I.stampeded_jobs', $1::text)) IS NOT NULL AS installed,
              to_regclass(format('%I.stampeded_schema_migrations', $1::text)) IS NOT NULL AS recorded`,
      [schema],
    );
  } catch (err) {
    throw connectionError(err, url);
  }
  if (row.num < REQUIRED_SERVER_VERSION_NUM) throw new CliError(SERVER_TOO_OLD(row.version, REQUIRED_SERVER_VERSION_NUM), EXIT.database);
  if (mustBeInstalled && !row.installed) throw new CliError(NOT_INSTALLED(schema), EXIT.database);
  // The seed's tables with no migration of ours recorded: another runtime's install, which `migrate` adopts.
  if (mustBeInstalled && !row.recorded) throw new CliError(NOT_ADOPTED(schema), EXIT.database);
}

export function connectionError(err: unknown, url: URL): CliError {
  const where = `${url.hostname || 'localhost'}:${url.port || 5432}`;
  const e = err as { code?: string; message?: string };
  switch (e.code) {
    case '28P01':
    case '28000':
      return new CliError(AUTH_FAILED(where), EXIT.database);
    case '3D000':
      return new CliError(NO_DATABASE(where, decodeURIComponent(url.pathname.slice(1))), EXIT.database);
    case 'ECONNREFUSED':
      return new CliError(CANNOT_CONNECT(where, 'connection refused'), EXIT.database);
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new CliError(CANNOT_CONNECT(where, `no such host "${url.hostname}"`), EXIT.database);
    default:
      return new CliError(CANNOT_CONNECT(where, firstLine(e.message ?? String(err))), EXIT.database);
  }
}

function firstLine(text: string): string {
  return text.split('\n')[0];
}

/** The URL with its password hidden, for messages. */
export function redact(raw: string): string {
  return raw.replace(/(\/\/[^:/@]*:)[^@]*@/, '$1***@');
}
