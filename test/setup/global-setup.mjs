// One PostgreSQL for the whole run; each test file makes a database of its
// own on it. PostgreSQL 18 by default (DATABASE_URL, Testcontainers or the
// embedded server: startPostgres), or, with STAMPEDED_TEST_PG set to 14, 15,
// 16 or 17, that major from its binaries package (the focused suite of each
// version, scripts/run-tests.mjs). The embedded server lives in a child
// process, so its exit hook never touches jest's own exit code. Uses the
// built @stampeded/testing: `npm test` builds first.
import { startPostgres } from '@stampeded/testing';
import { startPostgresMajor } from '../support/postgres-major.mjs';

export default async function globalSetup() {
  const started = Date.now();
  const major = process.env.STAMPEDED_TEST_PG ? Number(process.env.STAMPEDED_TEST_PG) : undefined;
  const server =
    major && major !== 18
      ? { ...(await startPostgresMajor(major, { durable: false, maxConnections: 400 })), provider: `PostgreSQL ${major} binaries` }
      : await startPostgres({ durable: false, maxConnections: 400 });
  process.env.STAMPEDED_TEST_SERVER_URL = server.url;
  globalThis.__stampededServer = server;
  process.stderr.write(`\nPostgreSQL for the tests: ${server.provider}, ready in ${Date.now() - started} ms\n`);
}
