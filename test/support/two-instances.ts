import { Controller, Get, Module, type DynamicModule, type INestApplicationContext, type Provider } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { HealthCheck, HealthCheckService } from '@nestjs/terminus';
import type pg from 'pg';
import { StampededModule, type RegisterQueueOptions, type StampededModuleOptions } from '@stampeded/nestjs';
import { StampededHealthIndicator } from '@stampeded/dashboard';
import { createTestDatabase, type TestDatabase } from '@stampeded/testing';
import { startPostgresMajor, type StartedPostgresMajor } from './postgres-major.mjs';
import { sqlClient, testDatabase } from './test-app.js';

/** The name of the second instance in the tests of several databases. */
export const BILLING = 'billing';

/** GET /health: every instance of the app under `stampeded` and `stampeded:<name>` (needs TerminusModule and StampededHealthModule). */
@Controller('health')
export class EachInstanceHealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly stampeded: StampededHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.stampeded.eachInstance('stampeded', { timeoutMs: 2000 })]);
  }
}

export interface TwoServers {
  /** A database of this file's own on the run's server: the default instance's. */
  main: TestDatabase;
  /** A second PostgreSQL 18 server, started for this file from the same binaries, and a database on it: the billing instance's. */
  server: StartedPostgresMajor;
  billing: TestDatabase;
  mainSql: pg.Client;
  billingSql: pg.Client;
}

/**
 * Two PostgreSQL servers for one spec file: the run's, and one more started
 * before the file's tests and stopped after them. Read the fields inside the
 * tests, once beforeAll has run.
 */
export function twoServers(): TwoServers {
  const handle = {} as TwoServers;
  beforeAll(async () => {
    handle.server = await startPostgresMajor(18, { durable: false });
    handle.main = await testDatabase();
    handle.billing = await createTestDatabase(handle.server.url);
    handle.mainSql = await sqlClient(handle.main.url);
    handle.billingSql = await sqlClient(handle.billing.url);
    // A server a test kills takes its client with it: the error event must not fail the run.
    handle.billingSql.on('error', () => {});
  }, 60_000);
  afterAll(async () => {
    await handle.mainSql?.end();
    await handle.billingSql?.end().catch(() => {});
    await handle.main?.drop();
    await handle.server?.stop();
  });
  return handle;
}

export interface TwoInstancesOptions {
  providers?: Provider[];
  main?: StampededModuleOptions;
  billing?: StampededModuleOptions;
  queues?: RegisterQueueOptions[];
  imports?: DynamicModule[];
}

/** The app's modules: a TypeORM DataSource on each server, the default instance on the first and the billing one on the second. */
export function twoInstanceImports(servers: TwoServers, options: TwoInstancesOptions = {}): DynamicModule[] {
  const worker = { pollIntervalMs: 200 };
  return [
    TypeOrmModule.forRoot({ type: 'postgres', url: servers.main.url }),
    TypeOrmModule.forRoot({ name: BILLING, type: 'postgres', url: servers.billing.url }),
    StampededModule.forRoot({ migrations: 'auto', ...options.main, worker: { ...worker, ...options.main?.worker } }),
    StampededModule.forRoot({
      name: BILLING,
      dataSource: BILLING,
      migrations: 'auto',
      ...options.billing,
      worker: { ...worker, ...options.billing?.worker },
    }),
    ...(options.queues?.length ? [StampededModule.registerQueue(...options.queues)] : []),
    ...(options.imports ?? []),
  ];
}

/** Boots an app with both instances; the caller closes it. */
export async function bootTwoInstances(servers: TwoServers, options: TwoInstancesOptions = {}): Promise<INestApplicationContext> {
  @Module({ imports: twoInstanceImports(servers, options), providers: options.providers ?? [] })
  class TwoInstancesModule {}
  return NestFactory.createApplicationContext(TwoInstancesModule, { logger: false, abortOnError: false });
}
