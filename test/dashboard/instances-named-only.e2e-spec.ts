import { Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { TerminusModule } from '@nestjs/terminus';
import { getQueueServiceToken, StampededModule, Task, type QueueService, type TaskHandler } from '@stampeded/nestjs';
import { StampededDashboardModule, StampededHealthIndicator, StampededHealthModule, StampededMetricsModule } from '@stampeded/dashboard';
import { BILLING, EachInstanceHealthController, twoServers } from '../support/two-instances.js';
import { waitFor } from '../support/test-app.js';
import { metricSample } from '../support/metrics.js';

// An app that declares only named instances: no forRoot() without a name, so no default instance.
const ORDERS = 'orders';

@Task('send-email', { queue: 'emails', instance: ORDERS })
class SendEmail implements TaskHandler {
  handle() {}
}

@Task('charge-card', { queue: 'invoices', instance: BILLING })
class ChargeCard implements TaskHandler {
  handle() {}
}

const auth = { username: 'ops', password: 'named-only-secret' };

describe('an app with only named instances: dashboard, health and metrics', () => {
  const servers = twoServers();
  let app: INestApplication;
  let base: string;
  let email: string;
  let charge: string;

  beforeAll(async () => {
    const instance = { migrations: 'auto' as const, worker: { pollIntervalMs: 200 }, maintenance: { leaderCheckIntervalMs: 100 } };
    @Module({
      imports: [
        TypeOrmModule.forRoot({ name: ORDERS, type: 'postgres', url: servers.main.url }),
        TypeOrmModule.forRoot({ name: BILLING, type: 'postgres', url: servers.billing.url }),
        StampededModule.forRoot({ name: ORDERS, dataSource: ORDERS, ...instance }),
        StampededModule.forRoot({ name: BILLING, dataSource: BILLING, ...instance }),
        StampededDashboardModule.forRoot({ path: '/stampeded', auth, refreshSeconds: 0 }),
        TerminusModule.forRoot({ logger: false }),
        StampededHealthModule,
        StampededMetricsModule.forRoot(),
      ],
      controllers: [EachInstanceHealthController],
      providers: [SendEmail, ChargeCard],
    })
    class NamedOnlyModule {}
    app = await NestFactory.create(NamedOnlyModule, { logger: false, abortOnError: false });
    await app.listen(0, '127.0.0.1');
    base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    const orders = app.get<string, QueueService>(getQueueServiceToken(ORDERS) as string);
    const billing = app.get<string, QueueService>(getQueueServiceToken(BILLING) as string);
    email = (await orders.enqueue(SendEmail, {})).id;
    charge = (await billing.enqueue(ChargeCard, {})).id;
    await orders.waitFor(SendEmail, email, { timeoutMs: 20_000 });
    await billing.waitFor(ChargeCard, charge, { timeoutMs: 20_000 });
  }, 60_000);
  afterAll(() => app?.close());

  const get = async (path: string) => {
    const response = await fetch(`${base}${path}`, {
      headers: { authorization: `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}` },
    });
    return { status: response.status, text: await response.text() };
  };

  it("serves each instance's pages under /instances/<name>, and the first the switcher lists at the dashboard's own path", async () => {
    const orders = await get('/stampeded/instances/orders/jobs');
    expect(orders.status).toBe(200);
    expect(orders.text).toContain(email.slice(-12));
    expect(orders.text).not.toContain(charge.slice(-12));
    const billing = await get('/stampeded/instances/billing/jobs');
    expect(billing.status).toBe(200);
    expect(billing.text).toContain(charge.slice(-12));
    expect(billing.text).not.toContain(email.slice(-12));

    // "billing" comes first in the switcher: the root shows its pages, and its links lead to billing's own URLs.
    const root = await get('/stampeded/jobs');
    expect(root.status).toBe(200);
    expect(root.text).toContain(charge.slice(-12));
    expect(root.text).not.toContain(email.slice(-12));
    expect(root.text).toContain(`href="/stampeded/instances/billing/jobs/${charge}`);
    expect(root.text).toMatch(/<a [^>]*aria-current="true"[^>]*>billing<\/a>/);
    expect(root.text).toContain('href="/stampeded/instances/orders/jobs"');
    for (const page of ['/stampeded', '/stampeded/queues/invoices', '/stampeded/workers', '/stampeded/health', '/stampeded/instances/orders/health']) {
      expect({ page, status: (await get(page)).status }).toEqual({ page, status: 200 });
    }

    // The API answers the same way; there is no default instance to show.
    expect(JSON.stringify(JSON.parse((await get('/stampeded/api/queues')).text))).toContain('invoices');
    const ordersQueues = JSON.stringify(JSON.parse((await get('/stampeded/instances/orders/api/queues')).text));
    expect(ordersQueues).toContain('emails');
    expect(ordersQueues).not.toContain('invoices');
    const none = await get('/stampeded/instances/default/jobs');
    expect(none.status).toBe(404);
    expect(JSON.parse(none.text).message).toBe(
      `No Stampeded instance "default" in this app: it has "billing", "orders". Pick one in the dashboard's instance switcher.`,
    );
  });

  it("acts through the root's API on the instance the root serves", async () => {
    const headers = { authorization: `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}` };
    const csrf = await fetch(`${base}/stampeded/api/csrf`, { headers });
    const cookie = csrf.headers
      .getSetCookie()
      .find((c) => c.startsWith('stampeded_csrf='))!
      .split(';')[0];
    const { token } = await csrf.json();
    const post = (path: string) => fetch(`${base}${path}`, { method: 'POST', headers: { ...headers, cookie, 'x-stampeded-csrf': token } });
    expect((await post('/stampeded/api/queues/invoices/pause')).status).toBe(200);
    const paused = async (sql: typeof servers.mainSql) => (await sql.query(`SELECT queue FROM stampeded_queue_policies WHERE paused`)).rows;
    expect(await paused(servers.billingSql)).toEqual([{ queue: 'invoices' }]);
    expect(await paused(servers.mainSql)).toEqual([]);
    expect((await post('/stampeded/api/queues/invoices/resume')).status).toBe(200);
    expect(await paused(servers.billingSql)).toEqual([]);
  });

  it('reports the health of each named instance, and says to name one when asked for the default', async () => {
    const up = await waitFor(async () => {
      const response = await fetch(`${base}/health`);
      return response.status === 200 ? JSON.parse(await response.text()) : null;
    }, 'both instances healthy');
    expect(Object.keys(up.info).sort()).toEqual(['stampeded:billing', 'stampeded:orders']);
    expect(up.info).toMatchObject({ 'stampeded:billing': { status: 'up' }, 'stampeded:orders': { status: 'up' } });
    const indicator = app.get(StampededHealthIndicator);
    await expect(indicator.isHealthy('stampeded', { instance: ORDERS })).resolves.toMatchObject({ stampeded: { status: 'up' } });
    await expect(indicator.isHealthy('stampeded')).rejects.toThrow(
      /no default instance.*it has "billing", "orders".*eachInstance\('stampeded'\).*\{ instance: 'billing' \}/,
    );
  });

  it('labels each instance series in the scrape', async () => {
    const response = await fetch(`${base}/metrics`);
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(metricSample(text, 'stampeded_jobs', { stampeded_instance: BILLING, queue: 'invoices', state: 'completed' })).toBe(1);
    expect(metricSample(text, 'stampeded_jobs', { stampeded_instance: ORDERS, queue: 'emails', state: 'completed' })).toBe(1);
    expect(metricSample(text, 'stampeded_jobs', { stampeded_instance: 'default' })).toBeUndefined();
    expect(metricSample(text, 'stampeded_job_outcomes_total', { stampeded_instance: BILLING, task: 'charge-card', outcome: 'completed' })).toBe(1);
    expect(metricSample(text, 'stampeded_job_outcomes_total', { stampeded_instance: ORDERS, task: 'send-email', outcome: 'completed' })).toBe(1);
  });
});
