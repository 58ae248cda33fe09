import { Injectable, Module, type DynamicModule, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Test } from '@nestjs/testing';
import {
  getQueueServiceToken,
  getQueueToken,
  InjectQueue,
  InjectQueueService,
  JobEvents,
  MaintenanceService,
  OnJobEvent,
  Queue,
  QueueService,
  StampededModule,
  Task,
  getJobEventsToken,
  getMaintenanceServiceToken,
  type JobEvent,
  type TaskHandler,
} from '@stampeded/nestjs';
import { drain, expectEnqueued } from '@stampeded/testing';
import { BILLING, bootTwoInstances, twoInstanceImports, twoServers, type TwoInstancesOptions } from '../support/two-instances.js';
import { waitFor } from '../support/test-app.js';

@Task('send-email', { queue: 'emails' })
class SendEmail implements TaskHandler<{ to: string }> {
  handle(args: { to: string }) {
    return { sent: args.to };
  }
}

@Task('charge-card', { queue: 'invoices', instance: BILLING })
class ChargeCard implements TaskHandler<{ cents: number }> {
  handle(args: { cents: number }) {
    return { charged: args.cents };
  }
}

// No queue: the billing database's own default queue, beside the default instance's.
@Task('close-month', { instance: BILLING, schedule: { every: '1h' } })
class CloseMonth implements TaskHandler {
  handle() {
    return { closed: true };
  }
}

/** What a user's service does: each instance's QueueService, injected by name. */
@Injectable()
class Checkout {
  constructor(
    readonly orders: QueueService,
    @InjectQueueService(BILLING) readonly billing: QueueService,
    @InjectQueue('invoices') readonly invoices: Queue,
  ) {}
}

@Injectable()
class BillingEvents {
  readonly seen: JobEvent[] = [];
  @OnJobEvent('completed', { instance: BILLING })
  completed(event: JobEvent) {
    this.seen.push(event);
  }
}

const rowsOf = async (sql: { query: (q: string, p?: unknown[]) => Promise<{ rows: { task: string; state: string }[] }> }, id: string) =>
  (await sql.query('SELECT task, state FROM stampeded_jobs WHERE id = $1', [id])).rows;

describe('several databases in one app', () => {
  const servers = twoServers();
  let app: INestApplicationContext;
  let checkout: Checkout;
  let defaultEvents: JobEvent[];

  beforeAll(async () => {
    app = await bootTwoInstances(servers, {
      providers: [SendEmail, ChargeCard, CloseMonth, Checkout, BillingEvents],
      queues: [{ name: 'invoices', instance: BILLING }],
    });
    checkout = app.get(Checkout);
    defaultEvents = [];
    app.get(JobEvents).events$.subscribe((e) => defaultEvents.push(e));
  }, 60_000);
  afterAll(() => app?.close());

  it('gives each instance its own services, under its own tokens', () => {
    // Identity, not equality: a failure prints no service whole.
    const same = (a: unknown, b: unknown) => a === b;
    expect(checkout.billing).toBeInstanceOf(QueueService);
    expect(same(checkout.billing, checkout.orders)).toBe(false);
    // app.get() by class answers with the default instance, whatever order the modules were imported in.
    expect(same(app.get(QueueService), checkout.orders)).toBe(true);
    expect(same(app.get(getQueueServiceToken()), checkout.orders)).toBe(true);
    expect(same(app.get(getQueueServiceToken(BILLING)), checkout.billing)).toBe(true);
    expect(same(app.get(getJobEventsToken(BILLING)), app.get(JobEvents))).toBe(false);
    expect(same(app.get(getMaintenanceServiceToken(BILLING)), app.get(MaintenanceService))).toBe(false);
    expect(same(app.get(getQueueToken('invoices')), checkout.invoices)).toBe(true);
    expect((checkout.billing as unknown as { db: { schema: string } }).db).not.toBe((checkout.orders as unknown as { db: unknown }).db);
  });

  it('routes jobs to each database by instance, and runs them with that instance worker', async () => {
    const email = await checkout.orders.enqueue(SendEmail, { to: 'a@b.c' });
    const charge = await checkout.billing.enqueue(ChargeCard, { cents: 500 });
    const byName = await checkout.billing.enqueue('charge-card', { cents: 7 });
    const byHandle = await checkout.invoices.enqueue('charge-card', { cents: 9 });
    for (const id of [charge.id, byName.id, byHandle.id]) {
      expect(await rowsOf(servers.mainSql, id)).toEqual([]);
      await waitFor(async () => (await rowsOf(servers.billingSql, id))[0]?.state === 'completed', `billing job ${id} completed on the billing server`);
    }
    expect(await rowsOf(servers.billingSql, email.id)).toEqual([]);
    await waitFor(async () => (await rowsOf(servers.mainSql, email.id))[0]?.state === 'completed', 'the email completed on the main server');
    // Each database's workers table holds that instance's worker, and its jobs went through it alone.
    const workersOf = async (sql: typeof servers.mainSql) => (await sql.query(`SELECT queues FROM stampeded_workers`)).rows.map((r) => r.queues);
    expect(await workersOf(servers.billingSql)).toHaveLength(1);
    expect(await workersOf(servers.mainSql)).toHaveLength(1);
  });

  it('refuses a task enqueued through an instance that does not run it, saying which to use', async () => {
    await expect(checkout.orders.enqueue(ChargeCard, { cents: 1 })).rejects.toThrow(
      /Task "charge-card" belongs to the instance "billing", but was enqueued through the instance "default".*@InjectQueueService\('billing'\)/,
    );
    await expect(checkout.orders.enqueue('charge-card', { cents: 1 })).rejects.toThrow(/belongs to the instance "billing"/);
    await expect(checkout.billing.enqueue(SendEmail, { to: 'x' })).rejects.toThrow(/belongs to the instance "default".*QueueService instead/);
    expect(Number((await servers.mainSql.query(`SELECT count(*) FROM stampeded_jobs WHERE task = 'charge-card'`)).rows[0].count)).toBe(0);
  });

  it('waits for and hears each instance jobs on that instance alone', async () => {
    const { id } = await checkout.billing.enqueue(ChargeCard, { cents: 42 });
    const job = await checkout.billing.waitFor(ChargeCard, id, { timeoutMs: 20_000 });
    expect(job.state).toBe('completed');
    expect(job.result).toEqual({ charged: 42 });
    await waitFor(() => app.get(BillingEvents).seen.some((e) => e.jobId === id), 'the billing @OnJobEvent method heard the completion');
    expect(defaultEvents.filter((e) => e.jobId === id)).toEqual([]);
    const email = await checkout.orders.enqueue(SendEmail, { to: 'b@c.d' });
    await waitFor(() => defaultEvents.some((e) => e.jobId === email.id && e.type === 'completed'), 'the default events heard the email');
    expect(app.get(BillingEvents).seen.filter((e) => e.jobId === email.id)).toEqual([]);
  });

  it('keeps schedules, queues and the maintenance leader per database', async () => {
    const schedules = async (sql: typeof servers.mainSql) => (await sql.query(`SELECT key FROM stampeded_schedules`)).rows.map((r) => r.key);
    await waitFor(async () => (await schedules(servers.billingSql)).includes('close-month'), 'the billing schedule upserted');
    expect(await schedules(servers.mainSql)).toEqual([]);
    const partitions = async (sql: typeof servers.mainSql) =>
      (await sql.query(`SELECT relname FROM pg_class WHERE relname = 'stampeded_jobs_invoices'`)).rows.length;
    expect(await partitions(servers.billingSql)).toBe(1);
    expect(await partitions(servers.mainSql)).toBe(0);
    // One leader in each database: the two instances do not compete for one lock.
    await waitFor(
      () => app.get(MaintenanceService).isLeader && app.get<string, MaintenanceService>(getMaintenanceServiceToken(BILLING)).isLeader,
      'both instances lead maintenance in their own database',
    );
  });

  it('drains and inspects one instance by name', async () => {
    await checkout.orders.enqueue(SendEmail, { to: 'not@billing' });
    await checkout.billing.enqueue(ChargeCard, { cents: 3 });
    const drained = await drain(app, { instance: BILLING });
    expect(drained.jobs.filter((job) => job.task !== 'charge-card' && job.task !== 'close-month')).toEqual([]);
    await checkout.orders.enqueue(SendEmail, { to: 'seen@default' }, { runAt: new Date(Date.now() + 3_600_000) });
    await expect(expectEnqueued(app, { task: 'send-email', args: { to: 'seen@default' } })).resolves.toHaveLength(1);
    await expect(expectEnqueued(app, { instance: BILLING, task: 'send-email' })).rejects.toThrow();
  });

  it('goes on with one instance while the other one database server is down', async () => {
    const before = await checkout.billing.enqueue(ChargeCard, { cents: 1 });
    await waitFor(async () => (await rowsOf(servers.billingSql, before.id))[0]?.state === 'completed', 'billing works before the crash');
    await servers.server.kill('SIGKILL');
    await expect(checkout.billing.enqueue(ChargeCard, { cents: 2 })).rejects.toThrow();
    for (let i = 0; i < 3; i++) {
      const { id } = await checkout.orders.enqueue(SendEmail, { to: `after-${i}@crash` });
      await waitFor(async () => (await rowsOf(servers.mainSql, id))[0]?.state === 'completed', `email ${i} completed after the billing server died`);
    }
  });
});

describe('several databases: what startup refuses', () => {
  const servers = twoServers();

  async function bootRefused(
    providers: unknown[],
    queues: { name: string; instance?: string }[] = [],
    imports: DynamicModule[] = [],
    instances: Pick<TwoInstancesOptions, 'main' | 'billing'> = {},
  ): Promise<string> {
    @Module({ imports: twoInstanceImports(servers, { queues, imports, ...instances }), providers: providers as never[] })
    class RefusedModule {}
    const app = await NestFactory.createApplicationContext(RefusedModule, { logger: false, abortOnError: false }).catch((err: Error) => err);
    if (!(app instanceof Error)) {
      await app.close();
      throw new Error('the app started');
    }
    return app.message;
  }

  it('refuses a task name that two instances would both claim', async () => {
    @Task('charge-card', { queue: 'payments' })
    class ChargeCardHere implements TaskHandler {
      handle() {}
    }
    expect(await bootRefused([ChargeCard, ChargeCardHere])).toMatch(
      /^The task "charge-card" belongs to two instances, "(default|billing)" and "(default|billing)": .*Keep one @Task\('charge-card'\), with \{ instance: '<name>' \}, or rename one\.$/,
    );
  });

  it('refuses a queue that two instances would both claim, from a task or from registerQueue()', async () => {
    @Task('audit', { queue: 'invoices' })
    class Audit implements TaskHandler {
      handle() {}
    }
    expect(await bootRefused([ChargeCard, Audit])).toMatch(
      /^The queue "invoices" belongs to two instances, "(default|billing)" and "(default|billing)": .*rename the queue/,
    );
    expect(await bootRefused([ChargeCard], [{ name: 'invoices' }])).toMatch(/^The queue "invoices" belongs to two instances/);
  });

  it('refuses worker.queues that name a queue another instance owns, saying which one and what to change', async () => {
    // "invoices" is billing's twice over (registerQueue and ChargeCard's queue): the default workers would claim from a database it is never in.
    const fromRegistered = await bootRefused([ChargeCard], [{ name: 'invoices', instance: BILLING }], [], {
      main: { worker: { queues: ['emails', 'invoices'] } },
    });
    expect(fromRegistered).toBe(
      `The worker.queues of the instance "default" name the queue "invoices", which belongs to the instance "billing" ` +
        `(its tasks or registerQueue() say so): its jobs are in that instance's database, where these workers never look. ` +
        `Take "invoices" out of the worker.queues of StampededModule.forRoot(); ` +
        `the workers of StampededModule.forRoot({ name: 'billing' }) claim it (add it to their worker.queues if they list them).`,
    );
    // A queue only a task uses counts too, whichever instance lists it and whichever Nest builds first.
    expect(await bootRefused([SendEmail], [], [], { billing: { worker: { queues: ['emails'] } } })).toMatch(
      /^The worker\.queues of the instance "billing" name the queue "emails", which belongs to the instance "default" .*StampededModule\.forRoot\(\) claim it/,
    );
  });

  it('refuses an instance no forRoot() declares, and a second forRoot() of one name', async () => {
    @Task('ship', { instance: 'shipping' })
    class Ship implements TaskHandler {
      handle() {}
    }
    expect(await bootRefused([Ship])).toBe(
      `@Task('ship') on Ship names the instance "shipping", which this app does not declare (it has "default", "billing"). ` +
        `Import StampededModule.forRoot({ name: 'shipping', ... }), or name one of those.`,
    );
    expect(await bootRefused([], [{ name: 'parcels', instance: 'shipping' }])).toMatch(
      /^StampededModule.registerQueue\("parcels"\) names the instance "shipping"/,
    );
    const again = StampededModule.forRoot({ name: BILLING, connection: { url: servers.billing.url } });
    expect(await bootRefused([], [], [again])).toMatch(/^StampededModule.forRoot\(\) declares the instance "billing" twice/);
    expect(() => StampededModule.forRoot({ name: 'no spaces' })).toThrow(/name "no spaces" is not an instance name/);
  });

  it('declares a named instance through forRootAsync(), its options from a factory', async () => {
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: servers.main.url }),
        TypeOrmModule.forRoot({ name: BILLING, type: 'postgres', url: servers.billing.url }),
        StampededModule.forRoot({ migrations: 'auto', worker: { enabled: false } }),
        StampededModule.forRootAsync({ name: BILLING, dataSource: BILLING, useFactory: async () => ({ migrations: 'auto', worker: { enabled: false } }) }),
      ],
    })
    class AsyncModule {}
    const app = await NestFactory.createApplicationContext(AsyncModule, { logger: false });
    try {
      const { id } = await app.get<string, QueueService>(getQueueServiceToken(BILLING) as string).enqueue('audit-month', {});
      expect(await rowsOf(servers.billingSql, id)).toEqual([{ task: 'audit-month', state: 'available' }]);
      expect(await rowsOf(servers.mainSql, id)).toEqual([]);
    } finally {
      await app.close();
    }
  });

  it('lets a test override an instance service by its token', async () => {
    const fake = { enqueue: async () => ({ id: 'fake', deduplicated: false }) };
    const moduleRef = await Test.createTestingModule({
      imports: twoInstanceImports(servers, { queues: [{ name: 'invoices', instance: BILLING }] }),
      providers: [Checkout],
    })
      .overrideProvider(getQueueServiceToken(BILLING))
      .useValue(fake)
      .compile();
    try {
      expect(moduleRef.get(Checkout).billing).toBe(fake);
      expect(moduleRef.get(Checkout).orders).toBeInstanceOf(QueueService);
    } finally {
      await moduleRef.close();
    }
  });
});
