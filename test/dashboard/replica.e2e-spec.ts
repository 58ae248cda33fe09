import { Module, type DynamicModule, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { createServer } from 'node:net';
import type pg from 'pg';
import { QueueService, StampededModule, type StampededModuleOptions } from '@stampeded/nestjs';
import { StampededDashboardModule, StampededHealthIndicator, StampededHealthModule, StampededMetricsModule } from '@stampeded/dashboard';
import { createTestDatabase, type TestDatabase } from '@stampeded/testing';
import { startPrimary, startStandby, type StartedPrimary, type Standby } from '../support/standby.js';
import { describeInChromium, docsScreenshot } from '../support/chromium.js';
import { openDashboardInChromium, type DashboardInChromium } from '../support/dashboard-in-chromium.js';
import { sqlClient, waitFor } from '../support/test-app.js';
import { metricSample } from '../support/metrics.js';

const BASIC = `Basic ${Buffer.from('ops:replica').toString('base64')}`;

/** A port nothing listens on: a replica that is down. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** An app with the dashboard, the metrics and the health indicator, its reads on `readConnection`. */
async function bootDashboard(url: string, readConnection: StampededModuleOptions['readConnection'], imports: DynamicModule[] = []) {
  @Module({
    imports: [
      ...imports,
      StampededModule.forRoot({ connection: { url }, migrations: 'auto', worker: { enabled: false }, readConnection }),
      StampededDashboardModule.forRoot({ path: '/stampeded', auth: { username: 'ops', password: 'replica' }, refreshSeconds: 0 }),
      StampededMetricsModule.forRoot(),
      StampededHealthModule,
    ],
  })
  class ReplicaDashboardModule {}
  const app = await NestFactory.create(ReplicaDashboardModule, { logger: ['error'] });
  await app.listen(0, '127.0.0.1');
  return { app, base: (await app.getUrl()).replace('[::1]', '127.0.0.1') };
}

describe('reads from a replica (a streaming standby of a primary)', () => {
  let primary: StartedPrimary;
  let standby: Standby;
  let db: TestDatabase;
  let app: INestApplication;
  let base: string;
  let queue: QueueService;
  /** On the standby's `postgres` database: pauses and resumes its replay. */
  let standbySql: pg.Client;
  /** On the primary's copy of the test's database: what the primary holds. */
  let primarySql: pg.Client;

  beforeAll(async () => {
    primary = await startPrimary();
    standby = await startStandby(primary);
    db = await createTestDatabase(primary.url);
    // The replica by the name of the app's TypeORM DataSource, as a user with two DataSources gives it.
    const replica = TypeOrmModule.forRoot({ name: 'replica', type: 'postgres', url: standby.at(db.name) });
    ({ app, base } = await bootDashboard(db.url, 'replica', [replica]));
    queue = app.get(QueueService);
    standbySql = await sqlClient(standby.url);
    // The last test stops the standby under it.
    standbySql.on('error', () => {});
    primarySql = await sqlClient(db.url);
    await standby.caughtUp();
  });

  afterEach(async () => {
    // A test that failed while replay was paused leaves the next one a standby that replays.
    await standbySql.query('SELECT pg_wal_replay_resume()').catch(() => {});
  });

  afterAll(async () => {
    await standbySql?.end().catch(() => {});
    await primarySql?.end();
    await app?.close();
    await db?.drop();
    await standby?.stop();
    await primary?.stop();
  });

  const get = (path: string) => fetch(`${base}${path}`, { headers: { authorization: BASIC }, redirect: 'manual' });
  const api = async (path: string) => (await (await get(`/stampeded/api${path}`)).json()) as any;
  const replicaStatus = async () => (await api('/replica')).replica as { readingFrom: string; caughtUp: boolean; lagSeconds: number | null; error?: string };
  const scrape = async () => (await fetch(`${base}/metrics`)).text();

  async function post(path: string) {
    const response = await get('/stampeded/api/csrf');
    const cookie = response.headers
      .getSetCookie()
      .find((c) => c.startsWith('stampeded_csrf='))!
      .split(';')[0];
    const { token } = (await response.json()) as { token: string };
    return fetch(`${base}${path}`, { method: 'POST', headers: { authorization: BASIC, cookie, 'x-stampeded-csrf': token }, redirect: 'manual' });
  }

  /** Stops the standby's replay and waits until it has; what it receives meanwhile waits unreplayed. */
  async function pauseReplay(): Promise<void> {
    await standbySql.query('SELECT pg_wal_replay_pause()');
    await waitFor(async () => (await standbySql.query(`SELECT pg_get_wal_replay_pause_state() = 'paused' AS paused`)).rows[0].paused, 'replay to pause');
  }

  async function resumeReplay(): Promise<void> {
    await standbySql.query('SELECT pg_wal_replay_resume()');
    await standby.caughtUp();
  }

  it('the lists, counts and metrics read the standby, and say how far behind it is; getJob() reads it only when asked', async () => {
    expect(await replicaStatus()).toEqual({ readingFrom: 'replica', caughtUp: true, lagSeconds: 0 });
    await pauseReplay();
    const { id } = await queue.enqueue('thumbnail', { size: 64 }, { queue: 'replica-list' });
    // The standby has received the enqueue's WAL and not replayed it.
    const behind = await waitFor(async () => {
      const status = await replicaStatus();
      return status.caughtUp ? null : status;
    }, 'the standby to report itself behind');
    expect(behind.readingFrom).toBe('replica');
    expect(behind.lagSeconds).toBeGreaterThan(0);

    expect((await api('/jobs?queue=replica-list')).jobs).toEqual([]);
    expect((await api('/queues')).queues.find((q: { queue: string }) => q.queue === 'replica-list')).toBeUndefined();
    const list = await (await get('/stampeded/jobs?queue=replica-list')).text();
    expect(list).not.toContain(id);
    expect(list).toMatch(/<p class="replica" data-reading-from="replica" data-lag-seconds="[\d.]+">Read from the replica, [^<]+ behind the primary\.<\/p>/);
    const metrics = await scrape();
    expect(metricSample(metrics, 'stampeded_jobs', { queue: 'replica-list', state: 'available' })).toBeUndefined();
    expect(metricSample(metrics, 'stampeded_replica_lag_seconds')).toBeGreaterThan(0);
    expect(metricSample(metrics, 'stampeded_replica_up')).toBe(1);

    // The default getJob() sees the app's own write; the one for display reads the standby.
    expect((await queue.getJob(id))?.state).toBe('available');
    expect(await queue.getJob(id, { replica: true })).toBeNull();
    // A link to a job the standby has not replayed yet still opens its page, from the primary.
    expect((await get(`/stampeded/jobs/${id}`)).status).toBe(200);

    await resumeReplay();
    expect((await api('/jobs?queue=replica-list')).jobs.map((j: { id: string }) => j.id)).toEqual([id]);
    expect(await replicaStatus()).toEqual({ readingFrom: 'replica', caughtUp: true, lagSeconds: 0 });
    expect((await queue.getJob(id, { replica: true }))?.state).toBe('available');
    const caughtUp = await scrape();
    expect(metricSample(caughtUp, 'stampeded_jobs', { queue: 'replica-list', state: 'available' })).toBe(1);
    expect(metricSample(caughtUp, 'stampeded_replica_lag_seconds')).toBe(0);
    expect(await (await get('/stampeded/jobs?queue=replica-list')).text()).toContain('Read from the replica, caught up.');
  });

  it('actions write to the primary, and the page they return to shows them', async () => {
    const { id } = await queue.enqueue('thumbnail', { size: 128 }, { queue: 'replica-actions' });
    await standby.caughtUp();
    await pauseReplay();
    expect((await post(`/stampeded/api/jobs/${id}/cancel?queue=replica-actions`)).status).toBeLessThan(300);
    expect((await primarySql.query(`SELECT state FROM stampeded_jobs WHERE id = $1`, [id])).rows[0].state).toBe('cancelled');
    // The standby has not replayed the cancel: the page still reads the job as it was.
    expect((await api(`/jobs/${id}?queue=replica-actions`)).state).toBe('available');
    await resumeReplay();
    expect((await api(`/jobs/${id}?queue=replica-actions`)).state).toBe('cancelled');

    // A button's redirect waits for the standby to show what it did, so the page it lands on is not stale.
    const page = await get(`/stampeded/jobs/${id}`);
    const cookie = page.headers
      .getSetCookie()
      .find((c) => c.startsWith('stampeded_csrf='))!
      .split(';')[0];
    const token = /name="_csrf" value="([^"]+)"/.exec(await page.text())![1];
    const form = new URLSearchParams({ _csrf: token, _back: `/stampeded/jobs/${id}` });
    const retried = await fetch(`${base}/stampeded/actions/jobs/${id}/retry?queue=replica-actions`, {
      method: 'POST',
      headers: { authorization: BASIC, cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
      redirect: 'manual',
    });
    expect(retried.status).toBe(303);
    expect((await api(`/jobs/${id}?queue=replica-actions`)).state).toBe('available');
  });

  it('health says degraded, and stays up, while the standby is further behind than maxReplicaLagSeconds', async () => {
    const health = app.get(StampededHealthIndicator);
    const options = { maxReplicaLagSeconds: 0, requireMaintenanceLeader: false };
    expect((await health.isHealthy('stampeded', options)).stampeded.degraded).toBeUndefined();
    await pauseReplay();
    await queue.enqueue('thumbnail', { size: 256 }, { queue: 'replica-health' });
    const degraded = await waitFor(async () => {
      const result = (await health.isHealthy('stampeded', options)).stampeded;
      return result.degraded ? result : null;
    }, 'health to say the standby is behind');
    expect(degraded.status).toBe('up');
    expect(degraded.degraded).toMatch(/the replica \(readConnection\) is \d+ s behind the primary, over maxReplicaLagSeconds \(0 s\)/);
    expect(degraded.replica).toMatchObject({ readingFrom: 'replica', caughtUp: false });
    await resumeReplay();
    expect((await health.isHealthy('stampeded', options)).stampeded).toMatchObject({ status: 'up', replica: { readingFrom: 'replica', caughtUp: true } });
  });

  describeInChromium('the lag on a page in the browser', () => {
    let dashboard: DashboardInChromium;

    beforeAll(async () => {
      dashboard = await openDashboardInChromium({
        providers: [],
        worker: { enabled: false },
        password: 'replica-browser',
        server: primary.url,
        stampeded: (own) => ({ readConnection: { url: standby.at(own.name) } }),
      });
      await standby.caughtUp();
    });

    afterAll(async () => {
      await dashboard?.close();
    });

    it('shows how far behind the replica is while its replay is paused, and that it caught up once resumed', async () => {
      const { page, base: app } = dashboard;
      const queueService = dashboard.app.get(QueueService);
      await page.goto(`${app}/stampeded/jobs`);
      expect(await page.locator('p.replica').textContent()).toBe('Read from the replica, caught up.');
      await pauseReplay();
      const { id } = await queueService.enqueue('thumbnail', { size: 512 }, { queue: 'replica-browser' });
      await waitFor(async () => {
        await page.goto(`${app}/stampeded/jobs?queue=replica-browser`);
        return /behind the primary/.test((await page.locator('p.replica').textContent()) ?? '');
      }, 'the page to say the replica is behind');
      await page.screenshot({ path: docsScreenshot('dashboard-replica-lag.png') });
      expect(await page.locator(`a[href*="${id}"]`).count()).toBe(0);
      await resumeReplay();
      await page.goto(`${app}/stampeded/jobs?queue=replica-browser`);
      expect(await page.locator('p.replica').textContent()).toBe('Read from the replica, caught up.');
      expect(await page.locator(`a[href*="${id}"]`).count()).toBeGreaterThan(0);
    });
  });

  it('reads the primary, and says so on the page, in the metrics and in health, while the replica does not answer', async () => {
    const down = await bootDashboard(db.url, { url: `postgres://postgres@127.0.0.1:${await closedPort()}/${db.name}` });
    try {
      const { id } = await queue.enqueue('thumbnail', { size: 1024 }, { queue: 'replica-down' });
      const jobs = (await (await fetch(`${down.base}/stampeded/api/jobs?queue=replica-down`, { headers: { authorization: BASIC } })).json()) as any;
      expect(jobs.jobs.map((j: { id: string }) => j.id)).toEqual([id]);
      const page = await (await fetch(`${down.base}/stampeded/jobs?queue=replica-down`, { headers: { authorization: BASIC } })).text();
      expect(page).toMatch(/<p class="replica bad" data-reading-from="primary">The replica does not answer \([^)]*\): this page reads the primary\.<\/p>/);
      expect(page).toContain(id);
      const metrics = await (await fetch(`${down.base}/metrics`)).text();
      expect(metricSample(metrics, 'stampeded_replica_up')).toBe(0);
      expect(metricSample(metrics, 'stampeded_jobs', { queue: 'replica-down', state: 'available' })).toBe(1);
      const health = (await down.app.get(StampededHealthIndicator).isHealthy('stampeded', { requireMaintenanceLeader: false })).stampeded;
      expect(health.status).toBe('up');
      expect(health.degraded).toMatch(/^the replica \(readConnection\) does not answer/);
    } finally {
      await down.app.close();
    }

    // The real standby stopped: the first app's next page falls back the same way.
    await standby.stop();
    expect((await replicaStatus()).readingFrom).toBe('primary');
    expect((await api('/jobs?queue=replica-down')).jobs).toHaveLength(1);
  });
});
