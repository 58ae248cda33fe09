import type { INestApplication } from '@nestjs/common';
import type pg from 'pg';
import type { Page } from 'playwright-core';
import { QueueService, Task, UnrecoverableError, type TaskHandler } from '@stampeded/nestjs';
import { SCREENSHOTS, describeInChromium } from '../support/chromium.js';
import { openDashboardInChromium, type DashboardInChromium } from '../support/dashboard-in-chromium.js';
import { waitFor } from '../support/test-app.js';

// A workflow drawn on its dashboard page, in Chromium: its jobs as boxes
// coloured by state, its dependencies as arrows, a failed branch and the
// jobs it cancelled marked, and the tree for a workflow too large to draw.

@Task('wf-step', { queue: 'graph' })
class WfStep implements TaskHandler {
  async handle() {}
}

@Task('wf-broken', { queue: 'graph', maxAttempts: 1 })
class WfBroken implements TaskHandler {
  async handle(): Promise<void> {
    throw new UnrecoverableError('refunds API answered 410');
  }
}

describeInChromium('a workflow as a graph in the dashboard', () => {
  let sql: pg.Client;
  let app: INestApplication;
  let base: string;
  let page: Page;
  let dashboard: DashboardInChromium | undefined;

  beforeAll(async () => {
    dashboard = await openDashboardInChromium({ providers: [WfStep, WfBroken], worker: { pollIntervalMs: 50 }, password: 'graph' });
    ({ sql, app, base, page } = dashboard);
  });

  afterAll(() => dashboard?.close());

  it('draws each job in its state, each dependency as an edge, and the jobs a failed branch cancelled', async () => {
    const flow = await app.get(QueueService).enqueueWorkflow({
      name: 'nightly-report',
      jobs: [
        { name: 'orders', task: 'wf-step', args: {} },
        { name: 'refunds', task: 'wf-broken', args: {} },
        { name: 'report', task: 'wf-step', args: {}, dependsOn: ['orders', 'refunds'] },
        { name: 'archive', task: 'wf-step', args: {}, dependsOn: ['report'] },
        { name: 'notify', task: 'wf-step', args: {}, dependsOn: ['orders', { name: 'report', ignoreFailure: true }] },
      ],
    });
    const states = async () =>
      Object.fromEntries(
        (
          await sql.query(`SELECT w.name, j.state FROM stampeded_workflow_jobs w JOIN stampeded_jobs j ON j.id = w.job_id WHERE w.workflow_id = $1`, [flow.id])
        ).rows.map((r) => [r.name, r.state]),
      );
    const expected = { orders: 'completed', refunds: 'discarded', report: 'cancelled', archive: 'cancelled', notify: 'completed' };
    const finished = new Set(['completed', 'discarded', 'cancelled']);
    await waitFor(async () => Object.values(await states()).every((s) => finished.has(s as string)), 'every job of the workflow to finish');
    expect(await states()).toEqual(expected);

    await page.goto(`${base}/stampeded/workflows/${flow.id}`);
    const nodes = await page.locator('svg.workflow-graph g.node').evaluateAll((gs) =>
      gs.map((g) => ({
        name: g.getAttribute('data-name'),
        state: g.getAttribute('data-state'),
        cancelledBy: g.getAttribute('data-cancelled-by'),
        href: g.closest('a')?.getAttribute('href') ?? null,
        fill: getComputedStyle(g.querySelector('rect')!).fill,
      })),
    );
    expect(nodes.map((n) => [n.name, n.state]).sort()).toEqual(Object.entries(expected).sort());
    for (const n of nodes) expect(n.href).toBe(`/stampeded/jobs/${flow.jobs[n.name!]}?queue=graph`);
    // report was cancelled by refunds' discard, archive by report's cancel; notify ran anyway.
    expect(Object.fromEntries(nodes.map((n) => [n.name, n.cancelledBy]))).toEqual({
      orders: null,
      refunds: null,
      report: 'refunds',
      archive: 'report',
      notify: null,
    });
    // One colour per state, distinct between the states shown.
    const fills = new Map(nodes.map((n) => [n.state, n.fill]));
    expect(new Set(fills.values()).size).toBe(3);
    expect(await page.textContent('g.node[data-name="report"] text:nth-of-type(2)')).toBe('cancelled: refunds discarded');

    const edges = await page
      .locator('svg.workflow-graph path.edge')
      .evaluateAll((ps) => ps.map((p) => `${p.getAttribute('data-from')}->${p.getAttribute('data-to')} ${p.getAttribute('class')!.replace('edge ', '')}`));
    expect(edges.sort()).toEqual(
      [
        'orders->report waits-for',
        'refunds->report cancelled-by',
        'report->archive cancelled-by',
        'orders->notify waits-for',
        'report->notify ignore-failure',
      ].sort(),
    );
    // Dependencies to the left of the jobs that wait for them.
    const xOf = async (name: string) => Number(await page.getAttribute(`g.node[data-name="${name}"] rect`, 'x'));
    expect(await xOf('orders')).toBeLessThan(await xOf('report'));
    expect(await xOf('report')).toBeLessThan(await xOf('archive'));
    expect(await xOf('report')).toBeLessThan(await xOf('notify'));
    await page.screenshot({ path: `${SCREENSHOTS}/workflow-graph.png`, fullPage: true });

    // A box is a link to its job's page.
    await Promise.all([page.waitForEvent('load'), page.click('g.node[data-name="refunds"]')]);
    expect(page.url()).toBe(`${base}/stampeded/jobs/${flow.jobs.refunds}?queue=graph`);

    // The tree is one link away.
    await page.goto(`${base}/stampeded/workflows/${flow.id}`);
    await Promise.all([page.waitForEvent('load'), page.click('p.tabs a:text-is("Tree")')]);
    expect(page.url()).toBe(`${base}/stampeded/workflows/${flow.id}?view=tree`);
    expect((await page.locator('span.tree').allTextContents()).map((t) => t.trim().replace('↳ ', ''))).toEqual([
      'archive',
      'report',
      'orders',
      'refunds',
      'notify',
      'orders',
      'report',
    ]);
    expect(await page.locator('svg.workflow-graph').count()).toBe(0);
  });

  it('shows a workflow past 200 jobs as the tree, and says why', async () => {
    const later = { delayMs: 3_600_000 };
    const jobs = Array.from({ length: 201 }, (_, i) => ({ name: `part-${i}`, task: 'wf-step', args: {}, options: later }));
    const flow = await app.get(QueueService).enqueueWorkflow({
      name: 'big',
      jobs: [...jobs, { name: 'join', task: 'wf-step', args: {}, dependsOn: jobs.map((j) => j.name) }],
    });
    await page.goto(`${base}/stampeded/workflows/${flow.id}`);
    expect(await page.locator('svg.workflow-graph').count()).toBe(0);
    expect(await page.textContent('p.too-large')).toBe('It has 202 jobs: past 200 a graph is too large to read, so its jobs are shown as a tree.');
    expect(await page.locator('span.tree').count()).toBe(202);
    expect(await page.locator('p.tabs a').count()).toBe(0);
  });
});
