import { Module, type DynamicModule, type INestApplicationContext, type Provider } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import pg from 'pg';
import { migrate, QueueService, StampededModule, type RegisterQueueOptions, type StampededModuleOptions } from '@stampeded/nestjs';
import { createTestDatabase, type TestDatabase } from '@stampeded/testing';

/** A database of this test file's own, on the run's one server. */
export function testDatabase(): Promise<TestDatabase> {
  const server = process.env.STAMPEDED_TEST_SERVER_URL;
  if (!server) throw new Error('STAMPEDED_TEST_SERVER_URL is not set: run the tests through jest, whose globalSetup starts PostgreSQL.');
  return createTestDatabase(server);
}

export interface TestAppOptions {
  providers?: Provider[];
  stampeded?: StampededModuleOptions;
  queues?: RegisterQueueOptions[];
  imports?: DynamicModule[];
  /** Use the app's own TypeORM DataSource (default) or give Stampeded a connection of its own. */
  via?: 'typeorm' | 'connection';
}

/**
 * The apps this spec file booted and has not closed. A test that fails
 * before its own app.close() would otherwise leave a worker, a LISTEN
 * connection and its reconnect timer running into the next file.
 */
const openApps = new Set<INestApplicationContext>();
afterAll(async () => {
  for (const app of [...openApps]) await app.close().catch(() => {});
});

/** Boots a Nest application context with StampededModule against `url`; closed after the file if a test does not close it. */
export async function bootApp(url: string, options: TestAppOptions = {}): Promise<INestApplicationContext> {
  const via = options.via ?? 'typeorm';
  const stampeded: StampededModuleOptions = {
    migrations: 'auto',
    ...options.stampeded,
    worker: { pollIntervalMs: 200, ...options.stampeded?.worker },
    ...(via === 'connection' ? { connection: { url } } : {}),
  };
  @Module({
    imports: [
      ...(via === 'typeorm' ? [TypeOrmModule.forRoot({ type: 'postgres', url })] : []),
      StampededModule.forRoot(stampeded),
      ...(options.queues?.length ? [StampededModule.registerQueue(...options.queues)] : []),
      ...(options.imports ?? []),
    ],
    providers: options.providers ?? [],
  })
  class TestAppModule {}
  const app = await NestFactory.createApplicationContext(TestAppModule, { logger: ['error', 'warn'], abortOnError: false });
  openApps.add(app);
  const close = app.close.bind(app);
  app.close = async () => {
    openApps.delete(app);
    await close();
  };
  return app;
}

/** A plain client for assertions on what the database holds. */
export async function sqlClient(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return client;
}

/** Polls until `check` returns a truthy value, or fails with what it last saw. */
export async function waitFor<T>(check: () => Promise<T> | T, what: string, timeoutMs = 20_000, everyMs = 50): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  while (Date.now() < deadline) {
    last = await check();
    if (last) return last as NonNullable<T>;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last seen: ${JSON.stringify(last)})`);
}

/**
 * A database of this test file's own, migrated, and a client on it: set up
 * before the file's tests and dropped after them. Read `db` and `sql` inside
 * the tests, once beforeAll has run.
 */
export function migratedDatabase(): { readonly db: TestDatabase; readonly sql: pg.Client } {
  const handle = {} as { db: TestDatabase; sql: pg.Client };
  beforeAll(async () => {
    handle.db = await testDatabase();
    await migrate(handle.db.url);
    handle.sql = await sqlClient(handle.db.url);
  });
  afterAll(async () => {
    await handle.sql?.end();
    await handle.db?.drop();
  });
  return handle;
}

/**
 * Two apps on one database of this file's own, neither running a worker:
 * `app` through TypeORM and `other` through a pool of its own (two processes
 * racing the same enqueues), plus `queue` (app's) and a client `sql`. Set up
 * before the file's tests and closed after them.
 */
export function twoEnqueuingApps(): {
  readonly db: TestDatabase;
  readonly app: INestApplicationContext;
  readonly other: INestApplicationContext;
  readonly queue: QueueService;
  readonly sql: pg.Client;
} {
  const handle = {} as { db: TestDatabase; app: INestApplicationContext; other: INestApplicationContext; queue: QueueService; sql: pg.Client };
  beforeAll(async () => {
    handle.db = await testDatabase();
    handle.app = await bootApp(handle.db.url, { stampeded: { worker: { enabled: false } } });
    handle.other = await bootApp(handle.db.url, { via: 'connection', stampeded: { worker: { enabled: false } } });
    handle.queue = handle.app.get(QueueService);
    handle.sql = await sqlClient(handle.db.url);
  });
  afterAll(async () => {
    await handle.sql?.end();
    await handle.other?.close();
    await handle.app?.close();
    await handle.db?.drop();
  });
  return handle;
}
