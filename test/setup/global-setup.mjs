// One PostgreSQL 18 for the whole run; each test file makes a database of its
// own on it. The embedded server lives in a child process, so its exit hook
// never touches jest's own exit code. Uses the built @stampeded/testing:
// `npm test` builds first.
import { startPostgres } from '@stampeded/testing';

export default async function globalSetup() {
  const started = Date.now();
  const server = await startPostgres({ durable: false, maxConnections: 400 });
  process.env.STAMPEDED_TEST_SERVER_URL = server.url;
  globalThis.__stampededServer = server;
  process.stderr.write(`\nPostgreSQL for the tests: ${server.provider}, ready in ${Date.now() - started} ms\n`);
}
