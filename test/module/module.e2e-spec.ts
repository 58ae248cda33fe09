import { Global, Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule, getDataSourceToken } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import type pg from 'pg';
import { InjectQueue, Queue, QueueService, StampededModule, Task, migrate, type JobContext, type TaskHandler } from '@stampeded/nestjs';
import { ReadDatabase } from '@stampeded/nestjs/internal';
import { TestClock, drain, expectEnqueued, type TestDatabase } from '@stampeded/testing';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { dataSourceToken } from '../../libs/stampeded/src/database/typeorm-token.js';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';

const execFileAsync = promisify(execFile);

@Task('noop', { queue: 'emails' })
class Noop implements TaskHandler {
  handle() {}
}

@Injectable()
class Mailer {
  constructor(@InjectQueue('mail') readonly emails: Queue) {}
}

const create = (module: unknown) => NestFactory.createApplicationContext(module as any, { logger: false, abortOnError: false });

describe('StampededModule', () => {
  let db: TestDatabase;
  let sql: pg.Client;

  beforeAll(async () => {
    db = await testDatabase();
    await migrate(db.url);
    sql = await sqlClient(db.url);
  });

  afterAll(async () => {
    await sql?.end();
    await db?.drop();
  });

  it('works imported alone, with the app default TypeORM DataSource', async () => {
    @Module({ imports: [TypeOrmModule.forRoot({ type: 'postgres', url: db.url }), StampededModule], providers: [Noop] })
    class AppModule {}
    const app = await create(AppModule);
    const { id } = await app.get(QueueService).enqueue(Noop, {});
    expect((await sql.query(`SELECT queue FROM stampeded_jobs WHERE id = $1`, [id])).rows[0].queue).toBe('emails');
    await waitFor(async () => (await sql.query(`SELECT state FROM stampeded_jobs WHERE id = $1`, [id])).rows[0].state === 'completed', 'the job to run');
    await app.close();
  });

  it('builds one core however often it is imported: forRoot in the root, plain imports in features', async () => {
    @Module({ imports: [StampededModule], providers: [Noop] })
    class FeatureA {}
    @Module({ imports: [StampededModule.forRoot({ connection: { url: db.url }, worker: { concurrency: 3, metadata: { app: 'one-core' } } })] })
    class FeatureB {}
    @Module({
      imports: [StampededModule.forRoot({ connection: { url: db.url }, worker: { concurrency: 3, metadata: { app: 'one-core' } } }), FeatureA, FeatureB],
    })
    class AppModule {}
    const app = await create(AppModule);
    const { rows } = await sql.query(`SELECT count(*)::int AS n FROM stampeded_workers WHERE metadata->>'app' = 'one-core'`);
    expect(rows[0].n).toBe(1);
    expect(app.get(QueueService)).toBe(app.select(FeatureA).get(QueueService));
    await app.close();
  });

  it('forRootAsync takes options from a factory with injected dependencies', async () => {
    @Injectable()
    class Config {
      url = db.url;
    }
    @Global()
    @Module({ providers: [Config], exports: [Config] })
    class ConfigModule {}
    @Module({
      imports: [
        ConfigModule,
        StampededModule.forRootAsync({
          inject: [Config],
          useFactory: (config: Config) => ({ connection: { url: config.url }, worker: { enabled: false } }),
        }),
      ],
    })
    class AppModule {}
    const app = await create(AppModule);
    const { id } = await app.get(QueueService).enqueue('from-async', {});
    expect(id).toBeTruthy();
    await app.close();
  });

  it('uses a named DataSource and never destroys a DataSource it did not create', async () => {
    const mine = new DataSource({ type: 'postgres', url: db.url });
    await mine.initialize();
    @Global()
    @Module({ providers: [{ provide: getDataSourceToken('jobs'), useValue: mine }], exports: [getDataSourceToken('jobs')] })
    class DataModule {}
    @Module({ imports: [DataModule, StampededModule.forRoot({ dataSource: 'jobs', worker: { enabled: false } })] })
    class AppModule {}
    const app = await create(AppModule);
    await app.get(QueueService).enqueue('named', {});
    await app.close();
    expect(mine.isInitialized).toBe(true);
    expect(await mine.query('SELECT 1 AS one')).toEqual([{ one: 1 }]);
    await mine.destroy();
  });

  it('connects as a DataSource given by options does: host and credentials, the writer of a replicated one', async () => {
    const url = new URL(db.url);
    const writer = {
      host: url.hostname,
      port: Number(url.port),
      username: decodeURIComponent(url.username),
      password: decodeURIComponent(url.password),
      database: url.pathname.slice(1),
    };
    // The reader points nowhere: a pool built from its settings could not enqueue.
    const replicated = new DataSource({ type: 'postgres', replication: { master: writer, slaves: [{ ...writer, port: 1 }] }, extra: { max: 1 } });
    @Global()
    @Module({ providers: [{ provide: getDataSourceToken('replicated'), useValue: replicated }], exports: [getDataSourceToken('replicated')] })
    class DataModule {}
    @Module({ imports: [DataModule, StampededModule.forRoot({ dataSource: 'replicated', worker: { enabled: false } })] })
    class AppModule {}
    const app = await create(AppModule);
    const { id } = await app.get(QueueService).enqueue('by-options', {});
    expect((await sql.query(`SELECT task FROM stampeded_jobs WHERE id = $1`, [id])).rows[0].task).toBe('by-options');
    await app.close();
    expect(replicated.isInitialized).toBe(false);

    // migrate() reads the same settings, from a DataSource not yet initialised.
    expect(await migrate(new DataSource({ type: 'postgres', ...writer }))).toEqual({ migrations: [], functions: [] });
  });

  it('says what to do when there is no DataSource and no connection', async () => {
    @Module({ imports: [StampededModule.forRoot({ worker: { enabled: false } })] })
    class AppModule {}
    await expect(create(AppModule)).rejects.toThrow(/found no TypeORM DataSource.*TypeOrmModule.forRoot/);
  });

  it('loads no TypeORM of its own: a process with `connection` never loads it, an app with TypeOrmModule is found by its token', async () => {
    // A fresh process: importing Stampeded and booting it on a connection of its own.
    const script = `
      import { createRequire } from 'node:module';
      import { NestFactory } from '@nestjs/core';
      import { Module } from '@nestjs/common';
      import { StampededModule } from '@stampeded/nestjs';
      const require = createRequire(import.meta.url);
      class App {}
      Module({ imports: [StampededModule.forRoot({ connection: { url: process.argv[1] }, worker: { enabled: false }, maintenance: { enabled: false } })] })(App);
      const app = await NestFactory.createApplicationContext(App, { logger: false });
      await app.close();
      console.log(JSON.stringify({ typeorm: require.resolve('typeorm') in require.cache }));
    `;
    const { stdout } = await execFileAsync(process.execPath, ['--input-type=module', '-e', script, db.url], { cwd: process.cwd() });
    expect(JSON.parse(stdout.trim().split('\n').pop()!)).toEqual({ typeorm: false });
    // In this process TypeORM is loaded, and the token is @nestjs/typeorm's own.
    expect(dataSourceToken()).toBe(getDataSourceToken());
    expect(dataSourceToken()).toBe(DataSource);
    expect(dataSourceToken('jobs')).toBe(getDataSourceToken('jobs'));
  });

  it('refuses unknown options', async () => {
    expect(() => StampededModule.forRoot({ workers: {} } as never)).toThrow(/forRoot\(\): unknown option "workers"/);
    expect(() => StampededModule.forRoot({ worker: { concurency: 3 } } as never)).toThrow(/forRoot\(\): worker: unknown option "concurency"/);
  });

  it('refuses a readConnection that is neither a DataSource name, a DataSource nor connection options', async () => {
    for (const readConnection of ['', 5432, ['postgres://replica/app']]) {
      expect(() => StampededModule.forRoot({ readConnection } as never)).toThrow(
        /forRoot\(\): readConnection must name the app's TypeORM DataSource of a replica/,
      );
    }
  });

  it('forRootAsync takes a readConnection by name beside the factory, or as settings from it', async () => {
    // The test's own database stands in for the replica: a server not in recovery is caught up.
    const beside = StampededModule.forRootAsync({ readConnection: 'replica', useFactory: () => ({ worker: { enabled: false } }) });
    const fromFactory = StampededModule.forRootAsync({ useFactory: () => ({ worker: { enabled: false }, readConnection: { url: db.url } }) });
    for (const stampeded of [beside, fromFactory]) {
      @Module({
        imports: [
          TypeOrmModule.forRoot({ type: 'postgres', url: db.url }),
          TypeOrmModule.forRoot({ name: 'replica', type: 'postgres', url: db.url }),
          stampeded,
        ],
      })
      class AsyncReadApp {}
      const app = await create(AsyncReadApp);
      try {
        const reads = app.get(ReadDatabase);
        expect(reads.replicated).toBe(true);
        expect(await reads.status()).toEqual({ readingFrom: 'replica', caughtUp: true, lagSeconds: 0 });
        const { id } = await app.get(QueueService).enqueue('noop', {});
        expect((await app.get(QueueService).getJob(id, { replica: true }))?.id).toBe(id);
        // Read on the pool of its own, which names itself to the server.
        const { rows } = await sql.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'stampeded-reads' AND datname = current_database()`,
        );
        expect(rows[0].n).toBeGreaterThan(0);
      } finally {
        await app.close();
      }
    }
  });

  it('refuses to start when readConnection names a DataSource the app does not have', async () => {
    await expect(bootApp(db.url, { stampeded: { readConnection: 'replica' } })).rejects.toThrow(/found no TypeORM DataSource named "replica"/);
  });

  it('fails fast, naming both classes, on a duplicate task name', async () => {
    @Task('same-name')
    class First implements TaskHandler {
      handle() {}
    }
    @Task('same-name')
    class Second implements TaskHandler {
      handle() {}
    }
    await expect(bootApp(db.url, { providers: [First, Second] })).rejects.toThrow(/Task "same-name" is declared twice, by First and by Second/);
  });

  it('fails fast on a task class without handle()', async () => {
    @Task('no-handle')
    class NoHandle {}
    await expect(bootApp(db.url, { providers: [NoHandle] })).rejects.toThrow(/NoHandle is marked @Task\('no-handle'\) but has no handle/);
  });

  it('fails fast on a task with a bad option', async () => {
    @Task('bad-option', { maxAttempts: 0 })
    class BadOption implements TaskHandler {
      handle() {}
    }
    await expect(bootApp(db.url, { providers: [BadOption] })).rejects.toThrow(/@Task\('bad-option'\) on BadOption: maxAttempts must be an integer from 1/);
  });

  it('registerQueue provisions a partition (UNLOGGED when asked) and injects a queue handle', async () => {
    const app = await bootApp(db.url, {
      providers: [Mailer],
      queues: [
        { name: 'mail', defaultJobOptions: { maxAttempts: 7 } },
        { name: 'metrics', unlogged: true },
      ],
      stampeded: { worker: { enabled: false } },
    });
    const { rows } = await sql.query(
      `SELECT relname, relpersistence FROM pg_class WHERE relname IN ('stampeded_jobs_mail', 'stampeded_jobs_metrics') ORDER BY relname`,
    );
    expect(rows).toEqual([
      { relname: 'stampeded_jobs_mail', relpersistence: 'p' },
      { relname: 'stampeded_jobs_metrics', relpersistence: 'u' },
    ]);
    const { id } = await app.get(Mailer).emails.enqueue('welcome', { to: 'x' });
    const { rows: job } = await sql.query(`SELECT tableoid::regclass::text AS partition, max_attempts FROM stampeded_jobs WHERE id = $1`, [id]);
    expect(job[0]).toEqual({ partition: 'stampeded_jobs_mail', max_attempts: 7 });
    expect((await app.get(Mailer).emails.counts()).available).toBeGreaterThanOrEqual(1);
    await app.close();
  });

  it('provisions one partition when several processes start together', async () => {
    const apps = await Promise.all(
      Array.from({ length: 4 }, () => bootApp(db.url, { queues: [{ name: 'together' }], stampeded: { worker: { enabled: false } } })),
    );
    const { rows } = await sql.query(`SELECT count(*)::int AS n FROM pg_class WHERE relname = 'stampeded_jobs_together'`);
    expect(rows[0].n).toBe(1);
    await Promise.all(apps.map((a) => a.close()));
  });

  it('refuses a queue whose partition name another queue already holds', async () => {
    const first = await bootApp(db.url, { queues: [{ name: 'a.b' }], stampeded: { worker: { enabled: false } } });
    await first.close();
    await expect(bootApp(db.url, { queues: [{ name: 'a-b' }], stampeded: { worker: { enabled: false } } })).rejects.toThrow(
      /Queue "a-b" would use partition stampeded_jobs_a_b, which already holds queue a.b/,
    );
  });

  it('drain() runs jobs as of the module clock: a TestClock moves past a backoff without sleeping', async () => {
    @Task('clocked', { queue: 'clockq', maxAttempts: 3, backoff: { baseMs: 30000, maxMs: 60000 } })
    class Clocked implements TaskHandler {
      handle(_: object, ctx: JobContext) {
        if (ctx.attempt === 1) throw new Error('first attempt fails');
      }
    }
    const clock = new TestClock();
    const app = await bootApp(db.url, { providers: [Clocked], stampeded: { clock, worker: { enabled: false } } });
    const { id } = await app.get(QueueService).enqueue('clocked', {});
    expect(await drain(app, { queue: 'clockq' })).toMatchObject({ retrying: 1 });
    expect(await drain(app, { queue: 'clockq' })).toMatchObject({ completed: 0, retrying: 0 });
    clock.advance('61s');
    expect(await drain(app, { queue: 'clockq' })).toMatchObject({ completed: 1 });
    expect((await app.get(QueueService).getJob(id))?.attempt).toBe(2);
    await app.close();
  });

  it('drain() runs due jobs to their outcome and expectEnqueued() finds pending ones', async () => {
    @Task('drained', { queue: 'drainq', maxAttempts: 2, backoff: { baseMs: 30000 } })
    class Drained implements TaskHandler<{ fail?: boolean }> {
      handle(args: { fail?: boolean }) {
        if (args.fail) throw new Error('nope');
      }
    }
    const app: INestApplicationContext = await bootApp(db.url, { providers: [Drained], stampeded: { worker: { enabled: false } } });
    const queue = app.get(QueueService);
    await queue.enqueue('drained', { n: 1 });
    await queue.enqueue('drained', { fail: true });
    await expectEnqueued(app, { task: 'drained', count: 2 });
    await expect(expectEnqueued(app, { task: 'drained', args: { n: 99 } })).rejects.toThrow(/found 0.*drainq\/drained/);
    const first = await drain(app, { queue: 'drainq' });
    expect(first).toMatchObject({ completed: 1, retrying: 1 });
    const second = await drain(app, { queue: 'drainq', withScheduled: true });
    expect(second).toMatchObject({ discarded: 1 });
    await app.close();
  });
});
