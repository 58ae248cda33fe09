import type { INestApplication } from '@nestjs/common';
import type pg from 'pg';
import type { Page } from 'playwright-core';
import { QueueService, Task, type TaskHandler } from '@stampeded/nestjs';
import { SCREENSHOTS, describeInChromium } from '../support/chromium.js';
import { openDashboardInChromium, type DashboardInChromium } from '../support/dashboard-in-chromium.js';

// Finding jobs, in Chromium and through the JSON API: by id or its tail, by
// error fingerprint, by a JSON value their args or meta contain.

@Task('charge', { queue: 'payments' })
class Charge implements TaskHandler {
  async handle() {}
}

describeInChromium('finding jobs in the dashboard', () => {
  let sql: pg.Client;
  let app: INestApplication;
  let base: string;
  let page: Page;
  let dashboard: DashboardInChromium | undefined;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    dashboard = await openDashboardInChromium({ providers: [Charge], worker: { enabled: false }, password: 'search' });
    ({ sql, app, base, page } = dashboard);
    const queue = app.get(QueueService);
    ids.order42 = (await queue.enqueue('charge', { orderId: 42, region: 'eu' })).id;
    ids.order7 = (await queue.enqueue('charge', { orderId: 7, region: 'eu' })).id;
    ids.order420 = (await queue.enqueue('charge', { orderId: 420 })).id;
    // Another runtime's job, and two that failed with the same error but for the numbers in it.
    const { rows } = await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, meta, state, finished_at, failure_kind, last_error, error_fingerprint)
       VALUES ('payments', 'charge', '{"activejob": {"job_class": "ChargeJob"}}', 'available', NULL, NULL, NULL, NULL),
              ('payments', 'charge', '{}', 'discarded', now(), 'raised', 'card 4242 declined', stampeded_fingerprint('card 4242 declined')),
              ('payments', 'charge', '{}', 'discarded', now(), 'raised', 'card 1881 declined', stampeded_fingerprint('card 1881 declined'))
       RETURNING id::text, encode(error_fingerprint, 'hex') AS fingerprint`,
    );
    ids.activejob = rows[0].id;
    ids.declined = rows[1].id;
    ids.declinedToo = rows[2].id;
    ids.fingerprint = rows[1].fingerprint;
  });

  afterAll(() => dashboard?.close());

  const listedIds = async () =>
    (await page.locator('main table tbody tr td:first-child a').evaluateAll((links) => links.map((a) => a.getAttribute('title')))).sort();

  it('finds the jobs whose args contain a JSON value, typed into the labelled field and sent with Enter', async () => {
    await page.goto(`${base}/stampeded/jobs`);
    await page.getByLabel('args contain').fill('{"orderId": 42}');
    await Promise.all([page.waitForEvent('load'), page.getByLabel('args contain').press('Enter')]);
    expect(await listedIds()).toEqual([ids.order42]);
    // Contained, not equal: a value inside a larger object matches, 420 does not.
    expect(await page.textContent('main')).toContain('No index serves this filter');
    // The searches act on no bulk action, which the plain filters alone drive.
    expect(await page.locator('p.bulk').count()).toBe(0);
    await page.screenshot({ path: `${SCREENSHOTS}/jobs-search.png`, fullPage: true });
    await page.goto(`${base}/stampeded/jobs?args=${encodeURIComponent('{"region":"eu"}')}&queue=payments`);
    expect(await listedIds()).toEqual([ids.order42, ids.order7].sort());
  });

  it("finds a job by its id's tail as the list shows it, or by its whole id", async () => {
    const tail = ids.order7.slice(-12);
    await page.goto(`${base}/stampeded/jobs?id=${encodeURIComponent(`…${tail}`)}`);
    expect(await listedIds()).toEqual([ids.order7]);
    await page.goto(`${base}/stampeded/jobs?id=${ids.order420.toUpperCase()}`);
    expect(await listedIds()).toEqual([ids.order420]);
  });

  it('finds every job with an error from its fingerprint, linked from the errors page', async () => {
    await page.goto(`${base}/stampeded/errors`);
    await Promise.all([page.waitForEvent('load'), page.click(`a[href*="fingerprint=${ids.fingerprint.slice(0, 12)}"]`)]);
    expect(await listedIds()).toEqual([ids.declined, ids.declinedToo].sort());
    expect(await page.inputValue('input[name="fingerprint"]')).toBe(ids.fingerprint.slice(0, 12));
  });

  it('finds the jobs whose meta contains a value, through the JSON API too', async () => {
    const get = (q: string) => page.request.get(`${base}/stampeded/api/jobs?${q}`);
    const byMeta = await (await get(`meta=${encodeURIComponent('{"activejob":{"job_class":"ChargeJob"}}')}`)).json();
    expect(byMeta.jobs.map((j: { id: string }) => j.id)).toEqual([ids.activejob]);
    expect(byMeta.scan).toEqual({ budget: 20_000, ranOut: false });
    const byFingerprint = await (await get(`fingerprint=${ids.fingerprint.slice(0, 8)}&state=discarded`)).json();
    expect(byFingerprint.jobs.map((j: { id: string }) => j.id).sort()).toEqual([ids.declined, ids.declinedToo].sort());
    expect(byFingerprint.scan).toBeUndefined();
    // A page at a time, in the failing index's order, the cursor carrying the fingerprint.
    const first = await (await get(`fingerprint=${ids.fingerprint.slice(0, 8)}&limit=1`)).json();
    const second = await (await get(`fingerprint=${ids.fingerprint.slice(0, 8)}&limit=1&after=${first.next}`)).json();
    expect([...first.jobs, ...second.jobs].map((j: { id: string }) => j.id).sort()).toEqual([ids.declined, ids.declinedToo].sort());
    expect(second.next).toBeNull();
  });

  it('says what to type for a search it cannot read', async () => {
    const api = await page.request.get(`${base}/stampeded/api/jobs?args=${encodeURIComponent('{orderId: 42}')}`);
    expect(api.status()).toBe(400);
    expect((await api.json()).message).toContain('args must be a JSON object the job\'s args contain, such as {"orderId": 42}');
    const html = await page.goto(`${base}/stampeded/jobs?fingerprint=abc`);
    expect(html?.status()).toBe(400);
    expect(await page.textContent('main')).toContain("fingerprint must be an error fingerprint's first 8 to 64 hex digits");
  });
});
