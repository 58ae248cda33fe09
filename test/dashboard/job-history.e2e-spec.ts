import type { INestApplication } from '@nestjs/common';
import type pg from 'pg';
import type { Page } from 'playwright-core';
import { QueueService, Task, type TaskHandler } from '@stampeded/nestjs';
import { SCREENSHOTS, describeInChromium } from '../support/chromium.js';
import { openDashboardInChromium, type DashboardInChromium } from '../support/dashboard-in-chromium.js';
import { waitFor } from '../support/test-app.js';

// What happened to a job, on its page in Chromium: its attempts drawn to
// scale with their workers, times and errors, and the jobs one click away.

const failuresLeft = new Map<string, number>();

/** Fails as often as its args say, then completes. */
@Task('flaky', { queue: 'history', maxAttempts: 5, backoff: { baseMs: 200, maxMs: 400 } })
class Flaky implements TaskHandler<{ key: string; failures: number }> {
  async handle(args: { key: string; failures: number }) {
    const left = failuresLeft.get(args.key) ?? args.failures;
    failuresLeft.set(args.key, left - 1);
    if (left > 0) throw new Error(`upstream answered 503 (${left} left)`);
  }
}

@Task('step', { queue: 'history' })
class Step implements TaskHandler {
  async handle() {}
}

describeInChromium("a job's history in the dashboard", () => {
  let sql: pg.Client;
  let app: INestApplication;
  let base: string;
  let page: Page;
  let dashboard: DashboardInChromium | undefined;

  beforeAll(async () => {
    dashboard = await openDashboardInChromium({ providers: [Flaky, Step], worker: { pollIntervalMs: 50 }, password: 'history' });
    ({ sql, app, base, page } = dashboard);
  });

  afterAll(() => dashboard?.close());

  const job = async (id: string) => (await sql.query(`SELECT * FROM stampeded_jobs WHERE id = $1`, [id])).rows[0];

  it("draws each attempt with its worker, start, duration, outcome and error, from what the job's row keeps", async () => {
    const { id } = await app.get(QueueService).enqueue('flaky', { key: 'a', failures: 2 });
    await waitFor(async () => (await job(id))?.state === 'completed', 'the job to complete on its third attempt');
    const row = await job(id);
    // Each failed attempt's entry keeps when it started and which worker ran it.
    expect(row.errors).toHaveLength(2);
    row.errors.forEach((e: Record<string, unknown>, i: number) => {
      expect(e.worker).toBe(row.attempted_by[i]);
      expect(new Date(e.started_at as string).getTime()).toBeLessThanOrEqual(new Date(e.at as string).getTime());
    });

    await page.goto(`${base}/stampeded/jobs/${id}?queue=history`);
    const rows = page.locator('section[aria-labelledby="attempts-heading"] table tbody tr');
    expect(await rows.count()).toBe(3);
    const cells = async (i: number) => (await rows.nth(i).locator('td').allTextContents()).map((c) => c.trim());
    const [first, second, third] = [await cells(0), await cells(1), await cells(2)];
    expect(first[0]).toBe('1');
    expect(first[5]).toBe('failed');
    expect(first[6]).toBe('Error: upstream answered 503 (2 left)');
    expect(second[6]).toBe('Error: upstream answered 503 (1 left)');
    expect(third[5]).toBe('completed');
    expect(third[4]).toMatch(/^\d+(\.\d)? (ms|s)$/);
    // The wait before the second attempt is its backoff.
    expect(second[1]).toMatch(/^\d+ ms|\d\.\d s$/);
    for (let i = 0; i < 3; i++) {
      expect(await rows.nth(i).locator('td').nth(2).locator('code').getAttribute('title')).toBe(row.attempted_by[i]);
      expect(await rows.nth(i).locator('time').getAttribute('datetime')).toMatch(/^\d{4}-/);
    }
    // Drawn to scale: one bar per attempt, in order along the line.
    const bars = page.locator('svg.timeline rect');
    expect(await bars.count()).toBe(3);
    const xs = await bars.evaluateAll((rects) => rects.map((r) => Number(r.getAttribute('x'))));
    expect(xs).toEqual([...xs].sort((a, b) => a - b));
    expect(await page.getAttribute('svg.timeline', 'aria-label')).toMatch(/^3 attempts over /);
    await page.screenshot({ path: `${SCREENSHOTS}/job-attempts.png`, fullPage: true });

    // The same, as JSON.
    const api = await page.request.get(`${base}/stampeded/api/jobs/${id}/history?queue=history`);
    const body = await api.json();
    expect(body.timeline.spans.map((s: { outcome: string }) => s.outcome)).toEqual(['failed', 'failed', 'completed']);
    expect(body.timeline.spans.map((s: { worker: string }) => s.worker)).toEqual(row.attempted_by);
  });

  it('links a discarded job to its dead letter and back, by keyboard', async () => {
    const { id } = await app.get(QueueService).enqueue('flaky', { key: 'b', failures: 9 }, { maxAttempts: 1, deadLetterQueue: 'history-dead' });
    await waitFor(async () => (await job(id))?.state === 'discarded', 'the job to be discarded');
    const { rows } = await sql.query(`SELECT id FROM stampeded_jobs WHERE queue = 'history-dead' AND source_id = $1`, [id]);
    await page.goto(`${base}/stampeded/jobs/${id}?queue=history`);
    const toCopy = page.locator('tr:has(th:text-is("its dead letter")) a');
    expect(await toCopy.getAttribute('href')).toBe(`/stampeded/jobs/${rows[0].id}?queue=history-dead`);
    await toCopy.focus();
    await Promise.all([page.waitForEvent('load'), page.keyboard.press('Enter')]);
    expect(page.url()).toContain(`/stampeded/jobs/${rows[0].id}`);
    expect(await page.getAttribute('tr:has(th:text-is("dead-letter copy of")) a', 'href')).toBe(`/stampeded/jobs/${id}?queue=history`);
  });

  it("shows a workflow job's place, its key's neighbours, and its dedup twin", async () => {
    const queue = app.get(QueueService);
    const later = { delayMs: 3_600_000 };
    const flow = await queue.enqueueWorkflow({
      name: 'nightly',
      jobs: [
        { name: 'fetch', task: 'step', args: {}, options: later },
        { name: 'report', task: 'step', args: {}, dependsOn: ['fetch'] },
      ],
    });
    await page.goto(`${base}/stampeded/jobs/${flow.jobs.report}?queue=history`);
    expect(await page.textContent('tr:has(th:text-is("its workflow")) td')).toBe('nightly, as report');
    expect(await page.getAttribute('tr:has(th:text-is("its workflow")) a', 'href')).toBe(`/stampeded/workflows/${flow.id}`);
    expect(await page.getAttribute('tr:has(th:text-is("waits for")) a', 'href')).toBe(`/stampeded/jobs/${flow.jobs.fetch}?queue=history`);
    await page.screenshot({ path: `${SCREENSHOTS}/job-related.png`, fullPage: true });

    const keyed = [];
    for (let i = 0; i < 3; i++) keyed.push(await queue.enqueue('step', { i }, { orderingKey: 'customer-7', ...later }));
    await page.goto(`${base}/stampeded/jobs/${keyed[1].id}?queue=history`);
    expect(await page.getAttribute('tr:has(th:text-is("key customer-7: before it")) a', 'href')).toBe(`/stampeded/jobs/${keyed[0].id}?queue=history`);
    expect(await page.getAttribute('tr:has(th:text-is("key customer-7: after it")) a', 'href')).toBe(`/stampeded/jobs/${keyed[2].id}?queue=history`);

    // Yesterday's job of the same daily scope, still waiting, and today's.
    const { rows } = await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, dedup_scope, dedup_period, inserted_at, scheduled_at)
       VALUES ('history', 'step', 'digest:7', 'day', now() - interval '1 day', now() + interval '1 hour') RETURNING id::text`,
    );
    const today = await queue.enqueue('step', {}, { dedup: { scope: 'digest:7', period: 'day' }, ...later });
    expect(today.deduplicated).toBe(false);
    await page.goto(`${base}/stampeded/jobs/${today.id}?queue=history`);
    expect(await page.getAttribute('tr:has(th:text-is("dedup digest:7 per day")) a', 'href')).toBe(`/stampeded/jobs/${rows[0].id}?queue=history`);
  });
});
