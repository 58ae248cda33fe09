import { Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { existsSync, mkdirSync } from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { QueueService, StampededModule, Task, type JobContext, type TaskHandler } from '@stampeded/nestjs';
import { StampededDashboardModule } from '@stampeded/dashboard';
import type { TestDatabase } from '@stampeded/testing';
import { testDatabase, waitFor } from '../support/test-app.js';

// Debian's chromium package, driven by playwright-core (which downloads no
// browser of its own). Where it is not installed -- CI reaches the npm
// registry only -- these tests are skipped, and say so in their title.
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const HAS_CHROMIUM = existsSync(CHROMIUM);
const SCREENSHOTS = '.test-results/screenshots';

let openGate!: () => void;
const gateOpened = new Promise<void>((resolve) => (openGate = resolve));
const upstream = { healthy: false };

@Task('crunch', { queue: 'work' })
class Crunch implements TaskHandler {
  async handle(_args: object, ctx: JobContext) {
    await Promise.race([gateOpened, new Promise((resolve) => ctx.signal.addEventListener('abort', resolve))]);
  }
}

@Task('fragile', { queue: 'work', maxAttempts: 1 })
class Fragile implements TaskHandler {
  async handle() {
    if (!upstream.healthy) throw new Error('payment provider answered 502');
  }
}

let finishRender!: () => void;
const renderFinished = new Promise<void>((resolve) => (finishRender = resolve));

/** Reports a quarter done, waits for the test, then reports the rest and returns where the report is. */
@Task('render-report', { queue: 'work' })
class RenderReport implements TaskHandler<{ pages: number }> {
  async handle(args: { pages: number }, ctx: JobContext) {
    await ctx.progress({ done: args.pages / 4, total: args.pages });
    await Promise.race([renderFinished, new Promise((resolve) => ctx.signal.addEventListener('abort', resolve))]);
    await ctx.progress({ done: args.pages, total: args.pages });
    return { url: 'https://files.example.com/report-42.pdf', pages: args.pages };
  }
}

const describeInBrowser = HAS_CHROMIUM ? describe : describe.skip;

describeInBrowser(
  `dashboard in a browser (${HAS_CHROMIUM ? CHROMIUM : `skipped: no Chromium at ${CHROMIUM}; apt-get install chromium, or set CHROMIUM_PATH`})`,
  () => {
    let db: TestDatabase;
    let app: INestApplication;
    let base: string;
    let browser: Browser;
    let page: Page;

    beforeAll(async () => {
      db = await testDatabase();
      @Module({
        imports: [
          StampededModule.forRoot({ connection: { url: db.url }, migrations: 'auto', worker: { pollIntervalMs: 100, concurrency: 5, prefetch: 5 } }),
          StampededDashboardModule.forRoot({ path: '/stampeded', auth: { username: 'ops', password: 'browser-test' }, refreshSeconds: 0 }),
          StampededDashboardModule.forRoot({ path: '/live', auth: { username: 'ops', password: 'browser-test' }, refreshSeconds: 1 }),
        ],
        providers: [Crunch, Fragile, RenderReport],
      })
      class BrowserTestModule {}
      app = await NestFactory.create(BrowserTestModule, { logger: ['error'] });
      await app.listen(0, '127.0.0.1');
      base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
      mkdirSync(SCREENSHOTS, { recursive: true });
      const { chromium } = await import('playwright-core');
      // --no-sandbox: CI and these machines run as root, where Chromium's sandbox refuses to start.
      browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
      const context = await browser.newContext({ httpCredentials: { username: 'ops', password: 'browser-test' }, viewport: { width: 1280, height: 800 } });
      page = await context.newPage();
    });

    afterAll(async () => {
      openGate();
      finishRender();
      await browser?.close();
      await app?.close();
      await db?.drop();
    });

    /** The number in a queue's row under a state's column on the queues page, as the browser shows it. */
    async function count(queue: string, state: string): Promise<number> {
      await page.goto(`${base}/stampeded`);
      const headers = (await page.locator('table thead th').allTextContents()).map((h) => h.trim().toLowerCase());
      const column = headers.indexOf(state);
      const cells = await page
        .locator('table tbody tr', { has: page.locator(`td:first-child a:text-is("${queue}")`) })
        .locator('td')
        .allTextContents();
      return column >= 0 && cells.length ? Number(cells[column].trim()) : -1;
    }

    it('asks for credentials, and logs in with them', async () => {
      // Without credentials Chromium is answered with a basic-auth challenge, and
      // headless it has nobody to ask: it gives up on the page.
      const anonymous = await browser.newContext();
      await expect((await anonymous.newPage()).goto(`${base}/stampeded`)).rejects.toThrow(/ERR_INVALID_AUTH_CREDENTIALS/);
      expect((await anonymous.request.get(`${base}/stampeded`)).status()).toBe(401);
      await anonymous.close();
      const ok = await page.goto(`${base}/stampeded`);
      expect(ok?.status()).toBe(200);
      expect(await page.textContent('h1')).toBe('Queues');
    });

    it('shows the counts move while jobs run', async () => {
      const queue = app.get(QueueService);
      await queue.enqueueMany(Array.from({ length: 12 }, (_, i) => ({ task: 'crunch', args: { i } })));
      // The worker runs five at once and claims five ahead (prefetch), so ten are executing by the table's count.
      await waitFor(async () => (await count('work', 'executing')) === 10, 'ten jobs executing on the page');
      expect(await count('work', 'available')).toBe(2);
      await page.screenshot({ path: `${SCREENSHOTS}/queues-running.png`, fullPage: true });
      openGate();
      await waitFor(async () => (await count('work', 'completed')) === 12, 'twelve jobs completed on the page');
      expect(await count('work', 'executing')).toBe(0);
      expect(await page.$('svg.chart rect')).not.toBeNull();
      await page.screenshot({ path: `${SCREENSHOTS}/queues-done.png`, fullPage: true });
    });

    it('retries a failed job from its page and watches it complete', async () => {
      const { id } = await app.get(QueueService).enqueue('fragile', { order: 42 });
      await waitFor(async () => (await count('work', 'discarded')) === 1, 'the failed job on the page');

      await page.goto(`${base}/stampeded/jobs?queue=work&state=discarded`);
      await page.click(`a[href^="/stampeded/jobs/${id}"]`);
      expect(await page.textContent('main')).toContain('payment provider answered 502');
      await page.screenshot({ path: `${SCREENSHOTS}/job-failed.png`, fullPage: true });

      upstream.healthy = true;
      // The retry posts and is sent back to this same URL: waiting for the URL
      // returns at once, and a reload then races the post's navigation. The
      // next load event is the page it was sent back to.
      await Promise.all([page.waitForEvent('load'), page.click('button:text-is("Retry")')]);
      expect(page.url()).toBe(`${base}/stampeded/jobs/${id}?queue=work`);
      await waitFor(async () => {
        await page.reload();
        return (await page.textContent('tr:has(th:text-is("state")) td'))?.trim() === 'completed';
      }, 'the retried job to show as completed');
      // Its earlier failure stays in its history.
      expect(await page.textContent('main')).toContain('payment provider answered 502');
      await page.screenshot({ path: `${SCREENSHOTS}/job-retried.png`, fullPage: true });
    });

    it("shows a running job's progress as a bar, then its result once it completes", async () => {
      const { id } = await app.get(QueueService).enqueue('render-report', { pages: 200 });
      const progress = 'tr:has(th:text-is("progress")) td';
      await page.goto(`${base}/stampeded/jobs/${id}?queue=work`);
      await waitFor(async () => {
        await page.reload();
        return (await page.textContent(progress))?.includes('"done":50');
      }, 'the progress on the page');
      expect(await page.getAttribute(`${progress} progress`, 'value')).toBe('0.25');
      expect(await page.textContent('h2:text-is("Result") + p')).toBe('none yet: stored when the job completes');
      await page.screenshot({ path: `${SCREENSHOTS}/job-progress.png`, fullPage: true });

      finishRender();
      await waitFor(async () => {
        await page.reload();
        return (await page.textContent('tr:has(th:text-is("state")) td'))?.trim() === 'completed';
      }, 'the job to show as completed');
      expect(await page.getAttribute(`${progress} progress`, 'value')).toBe('1');
      expect(JSON.parse((await page.textContent('h2:text-is("Result") + pre'))!)).toEqual({ url: 'https://files.example.com/report-42.pdf', pages: 200 });
      await page.screenshot({ path: `${SCREENSHOTS}/job-result.png`, fullPage: true });
    });

    it('refreshes a live page in place, and holds still while the tab is hidden or the toggle is off', async () => {
      const queue = app.get(QueueService);
      const later = { queue: 'later', delayMs: 3_600_000 };
      const rows = () => page.locator('main table tbody tr').count();
      const fetches: string[] = [];
      const onRequest = (r: { url(): string }) => r.url().includes('/live/jobs') && fetches.push(r.url());
      page.on('request', onRequest);
      /** Lets a few refresh periods go by, for the cases where nothing should happen. */
      const fewPeriods = () => new Promise((resolve) => setTimeout(resolve, 3_000));
      // As a browser reports a tab put in the background, and brought back.
      const setHidden = (hidden: boolean) =>
        page.evaluate(
          `Object.defineProperty(document, 'hidden', { configurable: true, get: () => ${hidden} }); document.dispatchEvent(new Event('visibilitychange'))`,
        );
      const sameDocument = () => page.evaluate(() => (globalThis as { sameDocument?: boolean }).sameDocument);
      try {
        await queue.enqueue('crunch', { n: 1 }, later);
        await page.goto(`${base}/live/jobs?queue=later`);
        expect(await rows()).toBe(1);
        expect(await page.isVisible('label.live')).toBe(true);
        expect(await page.isChecked('#live')).toBe(true);
        // A marker on the window survives only if the page is never reloaded.
        await page.evaluate(() => Object.assign(globalThis, { sameDocument: true }));
        await queue.enqueue('crunch', { n: 2 }, later);
        await waitFor(async () => (await rows()) === 2, 'the new job on the page, without a reload');
        expect(await sameDocument()).toBe(true);
        await page.screenshot({ path: `${SCREENSHOTS}/jobs-live.png`, fullPage: true });

        await setHidden(true);
        fetches.length = 0;
        await queue.enqueue('crunch', { n: 3 }, later);
        await fewPeriods();
        expect(fetches).toEqual([]);
        expect(await rows()).toBe(2);
        // Back in view, the page catches up at once.
        await setHidden(false);
        await waitFor(async () => (await rows()) === 3, 'the page to catch up once visible');

        await page.uncheck('#live');
        fetches.length = 0;
        await queue.enqueue('crunch', { n: 4 }, later);
        await fewPeriods();
        expect(fetches).toEqual([]);
        expect(await rows()).toBe(3);
        // The choice is remembered across loads, until it is switched back on.
        await page.reload();
        expect(await page.isChecked('#live')).toBe(false);
        await page.check('#live');
        await waitFor(async () => (await rows()) === 4, 'the page to refresh once switched back on');
        expect(await sameDocument()).toBeUndefined();
      } finally {
        page.off('request', onRequest);
      }
    });

    it('discards every job a filter matches, after a confirmation that counts them', async () => {
      const queue = app.get(QueueService);
      const parked = { queue: 'parked', delayMs: 3_600_000 };
      const jobs = await Promise.all([1, 2, 3].map((n) => queue.enqueue('crunch', { n }, parked)));
      await page.goto(`${base}/stampeded/jobs?queue=parked&state=available`);
      await Promise.all([page.waitForURL('**/stampeded/bulk/discard?**'), page.click('a:text-is("Discard…")')]);
      expect(await page.textContent('main p')).toBe('Discard 3 waiting jobs matching queue = parked, state = available?');
      await page.screenshot({ path: `${SCREENSHOTS}/bulk-confirm.png`, fullPage: true });
      // Nothing changes until the operator confirms.
      expect((await queue.getJob(jobs[0].id))?.state).toBe('available');
      await Promise.all([page.waitForURL('**/stampeded/jobs?queue=parked&state=available'), page.click('button:text-is("Discard 3 jobs")')]);
      expect(await page.textContent('main')).toContain('no jobs match');
      for (const { id } of jobs) expect((await queue.getJob(id))?.state).toBe('discarded');
    });
  },
);

if (!HAS_CHROMIUM) {
  process.stderr.write(`\ndashboard browser tests skipped: no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)\n`);
  // A skipped test whose title says why, for reports that list skipped tests.
  describe('dashboard in a browser', () => {
    it.skip(`needs Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`, () => {});
  });
}
