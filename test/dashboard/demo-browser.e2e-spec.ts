import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import type { TestDatabase } from '@stampeded/testing';
import { testDatabase, waitFor } from '../support/test-app.js';

// The demo app (`npm start`), built, run as a user runs it, and driven in
// Debian's Chromium through playwright-core. Skipped, saying why, where
// Chromium is not installed.
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const HAS_CHROMIUM = existsSync(CHROMIUM);
const SCREENSHOTS = '.test-results/screenshots';
const demoMain = fileURLToPath(new URL('../../apps/demo/dist/main.js', import.meta.url));

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });

const describeInBrowser = HAS_CHROMIUM ? describe : describe.skip;

describeInBrowser(`the demo app's dashboard in a browser (${HAS_CHROMIUM ? CHROMIUM : `skipped: no Chromium at ${CHROMIUM}`})`, () => {
  let db: TestDatabase;
  let demo: ChildProcess;
  let log = '';
  let base: string;
  let browser: Browser;
  let page: Page;
  let feedFixedAt = 0;

  beforeAll(async () => {
    db = await testDatabase();
    const port = await freePort();
    demo = spawn(process.execPath, [demoMain], {
      env: { ...process.env, NODE_OPTIONS: '', DATABASE_URL: db.url, PORT: String(port), STAMPEDED_DEMO_FEED_FIXED_AFTER_MS: '4000' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    demo.stdout!.on('data', (chunk) => (log += chunk));
    demo.stderr!.on('data', (chunk) => (log += chunk));
    await waitFor(() => log.includes('demo done'), 'the demo to run its jobs', 60_000);
    // The demo fixes its upstream feed 4 s after its first round.
    feedFixedAt = Date.now() + 4000;
    base = `http://127.0.0.1:${port}`;
    mkdirSync(SCREENSHOTS, { recursive: true });
    const { chromium } = await import('playwright-core');
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
    const context = await browser.newContext({ httpCredentials: { username: 'demo', password: 'demo' }, viewport: { width: 1280, height: 860 } });
    page = await context.newPage();
  });

  afterAll(async () => {
    await browser?.close();
    if (demo && demo.exitCode === null) {
      const exited = new Promise((resolve) => demo.once('exit', resolve));
      demo.kill('SIGTERM');
      await exited;
    }
    await db?.drop();
  });

  async function completed(queue: string): Promise<number> {
    await page.goto(`${base}/stampeded`);
    const headers = (await page.locator('table thead th').allTextContents()).map((h) => h.trim().toLowerCase());
    const cells = await page
      .locator('table tbody tr', { has: page.locator(`td:first-child a:text-is("${queue}")`) })
      .locator('td')
      .allTextContents();
    return cells.length ? Number(cells[headers.indexOf('completed')].trim()) : -1;
  }

  it('prints its dashboard address and credentials, and the counts move while the demo runs', async () => {
    expect(log).toMatch(/dashboard: http:\/\/127\.0\.0\.1:\d+\/stampeded \(user demo, password demo\)/);
    const first = await completed('emails');
    expect(first).toBeGreaterThanOrEqual(41);
    await waitFor(async () => (await completed('emails')) > first, 'the trickle of new emails to complete on the page');
    await page.screenshot({ path: `${SCREENSHOTS}/demo-queues.png`, fullPage: true });
    await page.goto(`${base}/stampeded/jobs?queue=emails`);
    expect(await page.locator('main table tbody time').count()).toBeGreaterThan(0);
    await page.screenshot({ path: `${SCREENSHOTS}/demo-jobs.png` });
    // Nothing is wrong with the demo's tables: a partition merely due for
    // autovacuum's next round is not marked red.
    await page.goto(`${base}/stampeded/health`);
    expect(await page.locator('h2:text-is("Vacuum") + .scroll table .bad').count()).toBe(0);
    await page.screenshot({ path: `${SCREENSHOTS}/demo-health.png`, fullPage: true });
  });

  it('retries the dead-lettered import once the feed is fixed, and watches it complete', async () => {
    await page.goto(`${base}/stampeded/jobs?queue=imports&state=discarded`);
    const link = page.locator('a[href^="/stampeded/jobs/"]').first();
    const href = (await link.getAttribute('href'))!;
    await link.click();
    expect(await page.textContent('main')).toContain('is not valid XML');
    expect(await page.textContent('h2:text-is("Result") + p')).toContain('none: the job was discarded');
    expect(await page.locator('section[aria-labelledby="attempts-heading"] tbody tr').count()).toBe(3);
    await page.screenshot({ path: `${SCREENSHOTS}/demo-job-discarded.png`, fullPage: true });
    await waitFor(() => Date.now() > feedFixedAt + 500, 'the demo feed to be fixed', 10_000, 250);
    await page.click('button:text-is("Retry")');
    await waitFor(async () => {
      await page.goto(`${base}${href}`);
      return (await page.textContent('tr:has(th:text-is("state")) td'))?.trim() === 'completed';
    }, 'the retried import to complete');
    await page.screenshot({ path: `${SCREENSHOTS}/demo-job-retried.png`, fullPage: true });
  });
});

if (!HAS_CHROMIUM) {
  describe("the demo app's dashboard in a browser", () => {
    it.skip(`needs Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`, () => {});
  });
}
