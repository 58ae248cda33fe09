import type { INestApplication } from '@nestjs/common';
import type pg from 'pg';
import type { Page } from 'playwright-core';
import { MaintenanceService, QueueService, Task, type TaskHandler } from '@stampeded/nestjs';
import { SCREENSHOTS, describeInChromium } from '../support/chromium.js';
import { openDashboardInChromium, type DashboardInChromium } from '../support/dashboard-in-chromium.js';
import { waitFor } from '../support/test-app.js';

// The insights page in Chromium: charts of the rollup that the maintenance
// leader keeps, drawn from jobs real workers ran, a range switched by a
// link, and the page refreshing in place as more jobs finish.

@Task('render', { queue: 'reports' })
class Render implements TaskHandler<{ ms: number }> {
  async handle(args: { ms: number }) {
    // Work of a known length, so that the run-time chart has something to draw.
    await new Promise((resolve) => setTimeout(resolve, args.ms));
  }
}

@Task('deliver', { queue: 'mail', maxAttempts: 3, backoff: { baseMs: 1, maxMs: 1 } })
class Deliver implements TaskHandler<{ failures: number }> {
  handle(args: { failures: number }, ctx: { attempt: number }) {
    if (ctx.attempt <= args.failures) throw new Error(`mailbox busy (attempt ${ctx.attempt})`);
  }
}

describeInChromium('insights in the dashboard', () => {
  let sql: pg.Client;
  let app: INestApplication;
  let base: string;
  let page: Page;
  let dashboard: DashboardInChromium | undefined;

  beforeAll(async () => {
    dashboard = await openDashboardInChromium({
      providers: [Render, Deliver],
      worker: { pollIntervalMs: 50 },
      // The rollup run by the test, reading every job finished before it.
      stampeded: () => ({ maintenance: { enabled: false, insights: { settle: 1 } } }),
      refreshSeconds: 1,
      password: 'insights',
    });
    ({ sql, app, base, page } = dashboard);
  });

  afterAll(() => dashboard?.close());

  /** Enqueues jobs, waits until the workers finish them all, and rolls them up. */
  async function runJobs(render: number, deliver: { failures: number }[]): Promise<void> {
    const queue = app.get(QueueService);
    const ids: string[] = [];
    for (let i = 0; i < render; i++) {
      ids.push((await queue.enqueue('render', { ms: 2 + (i % 10) * 3 }, { tenantId: i % 3 ? 'globex' : 'acme', destination: 'cdn.example' })).id);
    }
    for (const args of deliver) ids.push((await queue.enqueue('deliver', args, { tenantId: 'acme', destination: 'smtp.example' })).id);
    await waitFor(async () => {
      const { rows } = await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE id = ANY($1::uuid[]) AND finished_at IS NOT NULL`, [ids]);
      return rows[0].n === ids.length;
    }, `${ids.length} jobs to finish`);
    await app.get(MaintenanceService).run('insights');
  }

  const label = (n: number) => page.locator('main svg.chart').nth(n).getAttribute('aria-label');

  it('draws outcomes, failures, waits and runs, and the busiest tenants and destinations', async () => {
    // deliver: one completes at once, one after a retry, one fails all three attempts
    // (retried twice, then discarded).
    await runJobs(30, [{ failures: 0 }, { failures: 1 }, { failures: 3 }]);
    await page.goto(`${base}/stampeded/insights`);
    expect(await page.locator('main h1').textContent()).toBe('Insights');
    expect(await page.locator('main svg.chart').count()).toBe(4);
    expect(await label(0)).toBe('Jobs finished, all queues, last hour: 32 completed, 1 discarded, 0 cancelled');
    expect(await label(1)).toBe('Failed attempts, all queues, last hour: 4 failed, 3 of them retried');
    expect(await label(2)).toMatch(/^Wait before start, all queues, last hour: p50 .+, p95 .+, p99 .+$/);
    expect(await label(3)).toMatch(/^Run time, all queues, last hour: p50 .+, p95 .+, p99 .+$/);
    // A bar a minute, its tooltip saying what it holds.
    expect(await page.locator('main svg.chart').first().locator('g > title').count()).toBe(60);
    expect(await page.locator('main svg.chart').first().locator('rect').count()).toBeGreaterThan(0);
    const tenants = await page.locator('section[aria-labelledby="tenants"] tbody tr td:first-child').allTextContents();
    expect(tenants).toEqual(['globex', 'acme']);
    const destinations = await page.locator('section[aria-labelledby="destinations"] tbody tr td:first-child').allTextContents();
    expect(destinations).toEqual(['cdn.example', 'smtp.example']);
    expect(await page.getAttribute('section[aria-labelledby="tenants"] tbody tr a', 'href')).toBe('/stampeded/jobs?tenant=globex');

    // One queue, chosen in the form, the live refresh held (it would swap
    // the form out between the choice and the click).
    await page.uncheck('#live');
    await page.selectOption('select[name="queue"]', 'mail');
    await page.click('form.filters button[type="submit"]');
    await page.waitForURL(/queue=mail/);
    expect(await label(0)).toBe('Jobs finished, queue mail, last hour: 2 completed, 1 discarded, 0 cancelled');
  });

  it('switches the range with a link, a point an hour for the day', async () => {
    await page.goto(`${base}/stampeded/insights?queue=reports`);
    await page.click('a:text-is("Last day")');
    await page.waitForURL(/range=day/);
    expect(new URL(page.url()).searchParams.get('queue')).toBe('reports');
    expect(await page.locator('.ranges [aria-current]').textContent()).toBe('Last day');
    expect(await page.locator('main svg.chart').first().locator('g > title').count()).toBe(24);
    expect(await label(0)).toBe('Jobs finished, queue reports, last day: 30 completed, 0 discarded, 0 cancelled');
    await page.click('a:text-is("Last week")');
    await page.waitForURL(/range=week/);
    expect(await page.locator('main svg.chart').first().locator('g > title').count()).toBe(168);
  });

  it('refreshes in place as more jobs finish', async () => {
    await page.goto(`${base}/stampeded/insights?queue=reports`);
    await page.check('#live');
    // Set on this document: a reload would lose it, a refresh in place keeps it.
    await page.evaluate(() => Object.assign(globalThis, { kept: true }));
    await runJobs(5, []);
    await waitFor(async () => (await label(0))?.includes(': 35 completed'), 'the chart to show the five new jobs', 10_000);
    expect(await page.evaluate(() => (globalThis as { kept?: boolean }).kept)).toBe(true);
  });

  it('answers the same figures as JSON, and a range it does not know with a 400', async () => {
    const response = await page.request.get(`${base}/stampeded/api/insights?queue=mail&task=deliver&range=hour`);
    expect(response.status()).toBe(200);
    const body = await response.json();
    expect(body).toMatchObject({ range: 'hour', grain: 'minute', queue: 'mail', task: 'deliver' });
    expect(body.points).toHaveLength(60);
    expect(body.totals).toMatchObject({ completed: 2, failed: 4, retried: 3, discarded: 1, cancelled: 0 });
    expect(body.destinations).toEqual([{ key: 'smtp.example', jobs: 3, discarded: 1 }]);
    const bad = await page.request.get(`${base}/stampeded/api/insights?range=month`);
    expect(bad.status()).toBe(400);
    expect((await bad.json()).message).toMatch(/range must be one of hour, day, week/);
  });

  it('draws an hour of a busy install', async () => {
    // The rollup started afresh over an hour of history, as an install that
    // has run for a while holds it: the docs' screenshot.
    await sql.query(`DELETE FROM stampeded_insights; DELETE FROM stampeded_insight_keys; UPDATE stampeded_insights_watermark SET finished_at = NULL`);
    await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, state, tenant_id, destination, finished_at, claimed_at, scheduled_at, errors)
       SELECT q.queue, q.task, CASE WHEN g % 97 = 0 THEN 'discarded' ELSE 'completed' END,
              'tenant-' || (ARRAY['acme', 'globex', 'initech', 'umbrella', 'hooli'])[1 + (g * g) % 5],
              (ARRAY['smtp.example', 'api.payments.example', 'cdn.example'])[1 + g % 3],
              t.at, t.at - t.run, t.at - t.run - t.wait,
              CASE WHEN g % 13 = 0 THEN jsonb_build_array(jsonb_build_object('at', t.at - interval '20 s', 'attempt', 1, 'kind', 'raised')) ELSE '[]' END
         FROM generate_series(1, 4000) g
        CROSS JOIN LATERAL (SELECT (ARRAY['reports', 'mail', 'mail'])[1 + g % 3] AS queue, (ARRAY['render', 'deliver', 'deliver'])[1 + g % 3] AS task) q
        CROSS JOIN LATERAL (SELECT now() - interval '5 s' - (g % 60) * interval '1 minute' - (g % 7) * interval '1 s' AS at,
                                   make_interval(secs => (5 + (g % 40) * (g % 40) * 0.4 + 30 * (g % 60 BETWEEN 20 AND 24)::int) / 1000.0) AS run,
                                   make_interval(secs => (1 + (g % 23) * 3 + 400 * (g % 60 BETWEEN 20 AND 24)::int) / 1000.0) AS wait) t`,
    );
    await app.get(MaintenanceService).run('insights');
    await page.goto(`${base}/stampeded/insights`);
    const minutesWithBars = await page.locator('main svg.chart').first().locator('g:has(rect)').count();
    expect(minutesWithBars).toBeGreaterThanOrEqual(55);
    // Every hour the last hour touches: each of the two busiest tenants has 1,600 of the jobs.
    const busiest = page.locator('section[aria-labelledby="tenants"] tbody tr').first();
    expect((await busiest.locator('td').allTextContents()).map((c) => c.trim()).slice(0, 2)).toEqual(['tenant-globex', '1,600']);
    await page.screenshot({ path: `${SCREENSHOTS}/insights.png`, fullPage: true });
  });
});
