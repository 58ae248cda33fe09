import { Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { Browser, Page } from 'playwright-core';
import { getQueueServiceToken, QueueService, Task, type TaskHandler } from '@stampeded/nestjs';
import { StampededDashboardModule } from '@stampeded/dashboard';
import { BILLING, twoInstanceImports, twoServers } from '../support/two-instances.js';
import { describeInChromium, openChromium, SCREENSHOTS } from '../support/chromium.js';

@Task('send-email', { queue: 'emails' })
class SendEmail implements TaskHandler {
  handle() {}
}

@Task('charge-card', { queue: 'invoices', instance: BILLING })
class ChargeCard implements TaskHandler {
  handle() {}
}

const auth = { username: 'ops', password: 'instances-secret' };

/** An HTTP app with the dashboard at /stampeded over two instances on two servers, their workers off, one job waiting in each. */
function dashboardOverTwoServers() {
  const servers = twoServers();
  const handle = {} as { app: INestApplication; base: string; email: string; charge: string };
  beforeAll(async () => {
    const off = { worker: { enabled: false } };
    @Module({
      imports: [...twoInstanceImports(servers, { main: off, billing: off }), StampededDashboardModule.forRoot({ path: '/stampeded', auth, refreshSeconds: 0 })],
      providers: [SendEmail, ChargeCard],
    })
    class SwitcherModule {}
    handle.app = await NestFactory.create(SwitcherModule, { logger: false });
    await handle.app.listen(0, '127.0.0.1');
    handle.base = (await handle.app.getUrl()).replace('[::1]', '127.0.0.1');
    handle.email = (await handle.app.get(QueueService).enqueue(SendEmail, {})).id;
    handle.charge = (await handle.app.get<string, QueueService>(getQueueServiceToken(BILLING) as string).enqueue(ChargeCard, {})).id;
  }, 60_000);
  afterAll(() => handle.app?.close());
  return { servers, handle };
}

describe('dashboard over several databases: URLs and API', () => {
  const { handle } = dashboardOverTwoServers();
  const get = async (path: string) => {
    const response = await fetch(`${handle.base}${path}`, {
      headers: { authorization: `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}` },
    });
    return { status: response.status, text: await response.text() };
  };

  it("keeps the default instance's URLs, and serves a named one's under /instances/<name>", async () => {
    const main = await get('/stampeded/jobs');
    expect(main.status).toBe(200);
    expect(main.text).toContain(handle.email.slice(-12));
    expect(main.text).not.toContain(handle.charge.slice(-12));
    const billing = await get('/stampeded/instances/billing/jobs');
    expect(billing.status).toBe(200);
    expect(billing.text).toContain(handle.charge.slice(-12));
    expect(billing.text).not.toContain(handle.email.slice(-12));
    // Its links stay in its instance.
    expect(billing.text).toContain('href="/stampeded/instances/billing/jobs/');
    const job = await get(`/stampeded/instances/billing/jobs/${handle.charge}`);
    expect(job.status).toBe(200);
    expect((await get(`/stampeded/jobs/${handle.charge}`)).status).toBe(404);
  });

  it("serves each instance's JSON API, and a 404 that names the instances for one the app does not have", async () => {
    const queues = JSON.parse((await get('/stampeded/instances/billing/api/queues')).text);
    expect(JSON.stringify(queues)).toContain('invoices');
    expect(JSON.stringify(JSON.parse((await get('/stampeded/api/queues')).text))).not.toContain('invoices');
    const unknown = await get('/stampeded/instances/shipping/jobs');
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.text).message).toBe(
      `No Stampeded instance "shipping" in this app: it has "default", "billing". Pick one in the dashboard's instance switcher.`,
    );
  });
});

describeInChromium('dashboard over several databases: the instance switcher', () => {
  const { servers, handle } = dashboardOverTwoServers();
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    const opened = await openChromium(auth);
    browser = opened.browser;
    page = await opened.context.newPage();
  });
  afterAll(() => browser?.close());

  it('switches to the same page of the other instance, and acts on that instance alone', async () => {
    await page.goto(`${handle.base}/stampeded/jobs`);
    const switcher = page.getByRole('navigation', { name: 'Instances' });
    await expect(switcher.getByRole('link', { name: 'default' }).getAttribute('aria-current')).resolves.toBe('true');
    await switcher.getByRole('link', { name: 'billing' }).click();
    await page.waitForURL(`${handle.base}/stampeded/instances/billing/jobs`);
    await expect(page.getByRole('link', { name: handle.charge.slice(-12) }).count()).resolves.toBe(1);
    await expect(page.getByRole('link', { name: handle.email.slice(-12) }).count()).resolves.toBe(0);

    // A queue paused from billing's queues page is paused in billing's database, not in the default one's.
    await page.getByRole('navigation', { name: 'Dashboard' }).getByRole('link', { name: 'Queues' }).click();
    await page.waitForURL(`${handle.base}/stampeded/instances/billing`);
    await page
      .getByRole('row', { name: /invoices/ })
      .getByRole('button', { name: /pause/i })
      .click();
    await page.waitForURL(`${handle.base}/stampeded/instances/billing**`);
    await page.screenshot({ path: `${SCREENSHOTS}/instances-switcher.png` });
    const paused = async (sql: typeof servers.mainSql) => (await sql.query(`SELECT queue FROM stampeded_queue_policies WHERE paused`)).rows;
    expect(await paused(servers.billingSql)).toEqual([{ queue: 'invoices' }]);
    expect(await paused(servers.mainSql)).toEqual([]);

    await page.getByRole('navigation', { name: 'Instances' }).getByRole('link', { name: 'default' }).click();
    await page.waitForURL(`${handle.base}/stampeded`);
    await expect(page.getByRole('row', { name: /invoices/ }).count()).resolves.toBe(0);
  });
});
