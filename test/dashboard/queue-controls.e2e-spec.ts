import type { INestApplication } from '@nestjs/common';
import type pg from 'pg';
import type { Page } from 'playwright-core';
import { QueueControlService, QueueService, Task, type TaskHandler } from '@stampeded/nestjs';
import { SCREENSHOTS, describeInChromium, docsScreenshot } from '../support/chromium.js';
import { openDashboardInChromium, type DashboardInChromium } from '../support/dashboard-in-chromium.js';
import { waitFor } from '../support/test-app.js';

// A queue's controls on its dashboard page, in Chromium: its pause, its
// policy edited in a form and obeyed by a real worker, a bad value refused
// before anything is written, a breaker reset, each recorded with who did it.

const running = { now: 0, peak: 0 };

/** Takes a while, counting how many of it run at once in this process. */
@Task('capped-work', { queue: 'capped' })
class CappedWork implements TaskHandler {
  async handle() {
    running.peak = Math.max(running.peak, ++running.now);
    try {
      await new Promise((r) => setTimeout(r, 150));
    } finally {
      running.now--;
    }
  }
}

@Task('call-partner', { queue: 'partner' })
class CallPartner implements TaskHandler {
  async handle() {}
}

describeInChromium("a queue's controls in the dashboard", () => {
  let sql: pg.Client;
  let app: INestApplication;
  let base: string;
  let page: Page;
  let dashboard: DashboardInChromium | undefined;

  beforeAll(async () => {
    dashboard = await openDashboardInChromium({ providers: [CappedWork, CallPartner], worker: { concurrency: 6, pollIntervalMs: 50 }, password: 'controls' });
    ({ sql, app, base, page } = dashboard);
  });

  afterAll(() => dashboard?.close());

  const policyRow = async (queue: string) =>
    (
      await sql.query(
        `SELECT max_running, max_wait_secs, policy_by, policy_at, paused, paused_by, pause_reason FROM stampeded_queue_policies WHERE queue = $1`,
        [queue],
      )
    ).rows[0];

  it('edits the policy in a form, and a real worker holds the new cap', async () => {
    await page.goto(`${base}/stampeded/queues/capped`);
    await page.getByLabel('Max running').fill('2');
    await page.getByLabel('Max wait (seconds)').fill('30');
    await Promise.all([page.waitForEvent('load'), page.click('button:text-is("Save policy")')]);
    expect(page.url()).toBe(`${base}/stampeded/queues/capped`);
    const row = await policyRow('capped');
    expect(row).toMatchObject({ max_running: 2, max_wait_secs: 30, policy_by: 'ops (dashboard)' });
    expect(row.policy_at).toBeInstanceOf(Date);
    expect(await page.inputValue('#policy-maxRunning')).toBe('2');
    expect(await page.textContent('p.policy-by')).toMatch(/^Last set by ops \(dashboard\) /);
    // The queues page lists it now, its name a link to this page.
    await page.goto(`${base}/stampeded`);
    await Promise.all([page.waitForEvent('load'), page.click('a:text-is("capped")')]);
    expect(page.url()).toBe(`${base}/stampeded/queues/capped`);

    // Six jobs on a worker of concurrency 6: the cap, not the worker, decides how many run at once.
    const queue = app.get(QueueService);
    const jobs = await queue.enqueueMany(Array.from({ length: 6 }, () => ({ task: 'capped-work', args: {} })));
    await waitFor(
      async () =>
        (await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE id = ANY($1::uuid[]) AND state = 'completed'`, [jobs.map((j) => j.id)])).rows[0]
          .n === 6,
      'the six capped jobs to complete',
    );
    expect(running.peak).toBe(2);
  });

  it('refuses a bad value with the reason, keeps the form as typed, and writes nothing', async () => {
    const before = await policyRow('capped');
    await page.goto(`${base}/stampeded/queues/capped`);
    await page.fill('#policy-maxRunning', 'ten');
    const [response] = await Promise.all([page.waitForNavigation(), page.click('button:text-is("Save policy")')]);
    expect(response!.status()).toBe(400);
    expect(await page.textContent('#policy-error')).toBe(
      'The policy of queue "capped": policy.maxRunning must be a whole number from 1 to 2147483647 (or null for none), got "ten". ' +
        'Nothing was written: correct the value and save again (empty, or none, for no limit).',
    );
    expect(await page.inputValue('#policy-maxRunning')).toBe('ten');
    expect(await page.getAttribute('#policy-maxRunning', 'aria-invalid')).toBe('true');
    await page.screenshot({ path: docsScreenshot('dashboard-queue-policy-error.png'), fullPage: true });
    expect(await policyRow('capped')).toEqual(before);

    // The same through the API: a 400 with the reason, nothing written; a good one records the operator.
    const token = (await (await page.request.get(`${base}/stampeded/api/csrf`)).json()).token;
    const post = (path: string, data: unknown, headers: Record<string, string> = { 'x-stampeded-csrf': token }) =>
      page.request.post(`${base}/stampeded/api${path}`, { data, headers });
    const bad = await post('/queues/capped/policy', { maxRunning: 0 });
    expect(bad.status()).toBe(400);
    expect((await bad.json()).message).toMatch(/policy\.maxRunning must be a whole number from 1 to 2147483647 .*got 0\./);
    const misspelt = await post('/queues/capped/policy', { maxrunning: 3 });
    expect(misspelt.status()).toBe(400);
    expect((await misspelt.json()).message).toMatch(/maxrunning/);
    expect(await policyRow('capped')).toEqual(before);
    // Without the CSRF token, refused before anything runs.
    expect((await post('/queues/capped/policy', { maxRunning: 9 }, {})).status()).toBe(403);
    expect(await policyRow('capped')).toEqual(before);

    const good = await post('/queues/capped/policy', { maxRunning: 4, maxWaitSecs: null });
    expect(good.status()).toBe(200);
    expect(await good.json()).toMatchObject({ queue: 'capped', maxRunning: 4, maxWaitSecs: null, policyBy: 'ops (dashboard)' });
    expect(await (await page.request.get(`${base}/stampeded/api/queues/capped`)).json()).toMatchObject({
      queue: 'capped',
      maxRunning: 4,
      policyBy: 'ops (dashboard)',
    });
  });

  it('pauses with a reason and resumes from the queue page, recording who paused it', async () => {
    await page.goto(`${base}/stampeded/queues/capped`);
    await page.fill('#pause-reason', 'migrating the mail server');
    await Promise.all([page.waitForEvent('load'), page.click('button:text-is("Pause")')]);
    expect(await policyRow('capped')).toMatchObject({ paused: true, paused_by: 'ops (dashboard)', pause_reason: 'migrating the mail server' });
    expect(await page.textContent('p.paused')).toMatch(/^paused by ops \(dashboard\) .*: migrating the mail server$/);
    await Promise.all([page.waitForEvent('load'), page.click('button:text-is("Resume")')]);
    expect(await policyRow('capped')).toMatchObject({ paused: false, paused_by: null });
  });

  it('resets a tripped breaker: closed for the fleet, its deferred job run, who reset it recorded', async () => {
    await app.get(QueueControlService).openBreaker('partner-api', { for: '1h', by: 'on-call', reason: 'partner down' });
    const { id } = await app.get(QueueService).enqueue('call-partner', {}, { destination: 'partner-api' });
    await waitFor(
      async () =>
        (await sql.query(`SELECT failure_kind FROM stampeded_jobs WHERE id = $1 AND state = 'retryable'`, [id])).rows[0]?.failure_kind === 'breaker_open',
      'the job to be deferred by the open breaker',
    );

    await page.goto(`${base}/stampeded/queues/partner`);
    const row = page.locator('section, table').locator('tr:has(td:text-is("partner-api"))');
    expect((await row.locator('td').allTextContents()).slice(0, 3)).toEqual(['partner-api', 'open', '0']);
    await page.screenshot({ path: `${SCREENSHOTS}/queue-controls.png`, fullPage: true });
    await Promise.all([page.waitForEvent('load'), row.locator('button:text-is("Reset")').click()]);

    const breaker = (await sql.query(`SELECT state, closed_by, closed_at FROM stampeded_breakers WHERE destination = 'partner-api'`)).rows[0];
    expect(breaker).toMatchObject({ state: 'closed', closed_by: 'ops (dashboard)' });
    expect(breaker.closed_at).toBeInstanceOf(Date);
    await waitFor(
      async () => (await sql.query(`SELECT state FROM stampeded_jobs WHERE id = $1`, [id])).rows[0].state === 'completed',
      'the deferred job to run',
    );
    expect(await page.textContent('tr:has(td:text-is("partner-api")) td:nth-child(6)')).toMatch(/^ops \(dashboard\) /);

    // The API: the list, and a reset of a destination with no breaker.
    const breakers = await (await page.request.get(`${base}/stampeded/api/breakers`)).json();
    expect(breakers).toEqual([expect.objectContaining({ destination: 'partner-api', state: 'closed', closedBy: 'ops (dashboard)' })]);
    const token = (await (await page.request.get(`${base}/stampeded/api/csrf`)).json()).token;
    const none = await page.request.post(`${base}/stampeded/api/breakers/nowhere/reset`, { headers: { 'x-stampeded-csrf': token } });
    expect(none.status()).toBe(404);
  });
});
