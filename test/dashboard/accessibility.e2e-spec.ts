// The functions given to page.evaluate() run in the page, on its DOM.
/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
import { createRequire } from 'node:module';
import type { BrowserContext, Page } from 'playwright-core';
import { QueueService, Task, type TaskHandler } from '@stampeded/nestjs';
import { SCREENSHOTS, describeInChromium } from '../support/chromium.js';
import { openDashboardInChromium, type DashboardInChromium } from '../support/dashboard-in-chromium.js';
import { dashboardPageRoutes } from '../support/dashboard-pages.js';
import { waitFor } from '../support/test-app.js';

// Every page the dashboard serves, in Chromium, light and dark, at a
// desktop's width and a phone's: axe-core's WCAG A/AA rules (names of
// controls, links and buttons, contrast of text against what is behind it,
// landmarks, headings), one h1, no sideways scrolling of the page at 375 px,
// a visible focus, and the main actions done with the keyboard alone.

const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
const PASSWORD = 'a11y';

@Task('a11y-step', { queue: 'orders' })
class Step implements TaskHandler {
  async handle() {}
}

@Task('a11y-charge', { queue: 'orders', maxAttempts: 1, deadLetterQueue: 'orders-dead' })
class Charge implements TaskHandler {
  async handle() {
    throw new Error('card declined by the issuer, reference 4f1c2a9e-86d3-4b0e-9c55-1f7a2be04d93-auth-7731209: ask for another card');
  }
}

@Task('a11y-nightly', { queue: 'orders', schedule: { cron: '0 3 * * *' } })
class Nightly implements TaskHandler {
  async handle() {}
}

const VARIANTS = [
  { name: 'light', colorScheme: 'light', width: 1280 },
  { name: 'dark', colorScheme: 'dark', width: 1280 },
  { name: 'light phone', colorScheme: 'light', width: 375 },
  { name: 'dark phone', colorScheme: 'dark', width: 375 },
] as const;

describeInChromium('the dashboard, by keyboard, on a phone and to a screen reader', () => {
  let dashboard: DashboardInChromium | undefined;
  let base: string;
  const contexts: BrowserContext[] = [];
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    dashboard = await openDashboardInChromium({ providers: [Step, Charge, Nightly], worker: { pollIntervalMs: 50 }, password: PASSWORD });
    base = `${dashboard.base}/stampeded`;
    const queue = dashboard.app.get(QueueService);
    await queue.enqueueMany(Array.from({ length: 6 }, (_, i) => ({ task: Step, args: { i } })));
    ids.failed = (await queue.enqueue(Charge, { order: 1001 })).id;
    const flow = await queue.enqueueWorkflow({
      name: 'nightly-report',
      jobs: [
        { name: 'fetch', task: 'a11y-step', args: {} },
        { name: 'report', task: 'a11y-step', args: {}, dependsOn: ['fetch'] },
      ],
    });
    ids.workflow = flow.id;
    const sql = dashboard.sql;
    await waitFor(async () => {
      const { rows } = await sql.query(`SELECT count(*) FILTER (WHERE state NOT IN ('completed', 'discarded'))::int AS open FROM stampeded_jobs`);
      return rows[0].open === 1; // the dead letter, which waits for an operator
    }, 'the jobs to settle');
  });

  afterAll(async () => {
    for (const context of contexts) await context.close();
    await dashboard?.close();
  });

  /** Where each page is visited: every route of the pages controller, with the ids the seed made. */
  const visits = (): Record<string, string[]> => ({
    '': [''],
    jobs: ['/jobs', '/jobs?queue=orders-dead'],
    'jobs/:id': [`/jobs/${ids.failed}?queue=orders`],
    'queues/:queue': ['/queues/orders'],
    'bulk/:action': ['/bulk/retry?queue=orders&state=discarded'],
    errors: ['/errors'],
    workers: ['/workers'],
    schedules: ['/schedules'],
    workflows: ['/workflows'],
    'workflows/:id': [`/workflows/${ids.workflow}`, `/workflows/${ids.workflow}?view=tree`],
    health: ['/health'],
    insights: ['/insights', '/insights?range=week'],
  });

  it('visits every page the pages controller serves', () => {
    // A page added without a visit here fails this test, not silently the others.
    expect(Object.keys(visits()).sort()).toEqual(dashboardPageRoutes());
  });

  async function open(variant: (typeof VARIANTS)[number]): Promise<Page> {
    const context = await dashboard!.browser.newContext({
      httpCredentials: { username: 'ops', password: PASSWORD },
      viewport: { width: variant.width, height: 800 },
      colorScheme: variant.colorScheme,
      // Lets axe-core be added to pages whose policy allows their own scripts only.
      bypassCSP: true,
    });
    contexts.push(context);
    return context.newPage();
  }

  async function axe(page: Page): Promise<string[]> {
    await page.addScriptTag({ path: AXE });
    const violations = await page.evaluate(async () => {
      const run = (window as unknown as { axe: { run(options: object): Promise<{ violations: any[] }> } }).axe.run;
      const result = await run({ runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice'] } });
      return result.violations.map(
        (v: any) => `${v.id}: ${v.help} (${v.nodes.length}x, e.g. ${v.nodes[0].target.join(' ')}${v.nodes[0].any[0] ? `: ${v.nodes[0].any[0].message}` : ''})`,
      );
    });
    return violations;
  }

  for (const variant of VARIANTS) {
    it(`passes axe's WCAG AA rules with one h1 on every page, ${variant.name}`, async () => {
      const page = await open(variant);
      const found: string[] = [];
      for (const [route, paths] of Object.entries(visits())) {
        for (const [i, path] of paths.entries()) {
          const response = await page.goto(`${base}${path}`);
          const shot = `${variant.name}-${route || 'queues'}${i ? `-${i}` : ''}`.replace(/[^a-z0-9-]+/g, '-');
          await page.screenshot({ path: `${SCREENSHOTS}/a11y-${shot}.png`, fullPage: true });
          expect(response?.status()).toBe(200);
          expect(await page.evaluate(() => document.documentElement.dataset.theme ?? '')).toBe('');
          for (const v of await axe(page)) found.push(`${path}: ${v}`);
          // Colours come from the theme's custom properties, so that both themes stay whole.
          const painted = await page.evaluate(() => document.body.innerHTML.match(/(fill|stroke|color|background)(="|:\s*)#[0-9a-f]{3,8}/gi));
          if (painted) found.push(`${path}: colours outside the theme: ${painted.slice(0, 3).join(', ')}`);
          if ((await page.locator('h1').count()) !== 1) found.push(`${path}: ${await page.locator('h1').count()} h1 elements`);
          if (variant.width > 1000) {
            // A short word in a table cell is read whole: "completed", not "complet / ed"
            // (a hyphenated name may wrap at its hyphen when the table is crowded).
            const broken = await page.evaluate(() =>
              [...document.querySelectorAll('main td')]
                .filter((td) => {
                  const text = (td as HTMLElement).innerText.trim();
                  if (!text || /[\s-]/.test(text) || text.length > 24) return false;
                  // Each piece of text on one line (a tag's box around it is not a second line).
                  const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
                  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                    const range = document.createRange();
                    range.selectNodeContents(node);
                    if (new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size > 1) return true;
                  }
                  return false;
                })
                .map((td) => (td as HTMLElement).innerText.trim()),
            );
            if (broken.length) found.push(`${path}: words broken across lines in table cells: ${broken.slice(0, 3).join(', ')}`);
          }
          if (variant.width < 400) {
            const overflow = await page.evaluate(() => {
              const width = document.documentElement.clientWidth;
              const by = document.documentElement.scrollWidth - width;
              // The outermost elements that stick out: what to fix.
              const out = [...document.querySelectorAll('body *')].filter(
                (el) => el.getBoundingClientRect().right > width + 0.5 && !(el.parentElement && el.parentElement.getBoundingClientRect().right > width + 0.5),
              );
              return { by, out: out.slice(0, 3).map((el) => `${el.tagName.toLowerCase()}.${el.className}`) };
            });
            if (overflow.by > 0) found.push(`${path}: the page scrolls sideways by ${overflow.by} px at ${variant.width} px (${overflow.out.join(', ')})`);
          }
        }
      }
      expect(found).toEqual([]);
    });
  }

  it('shows where the focus is on every control, in both themes', async () => {
    for (const variant of VARIANTS.slice(0, 2)) {
      const page = await open(variant);
      for (const path of ['', `/jobs/${ids.failed}?queue=orders`, '/jobs', `/workflows/${ids.workflow}`]) {
        await page.goto(`${base}${path}`);
        const unseen: string[] = [];
        for (let i = 0; i < 25; i++) {
          await page.keyboard.press('Tab');
          const focus = await page.evaluate(() => {
            const el = document.activeElement as HTMLElement;
            if (!el || el === document.body) return null;
            const style = getComputedStyle(el);
            return {
              what: `${el.tagName} ${el.textContent?.trim().slice(0, 30)}`,
              outline: style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) >= 2,
            };
          });
          if (focus && !focus.outline) unseen.push(focus.what);
        }
        expect({ path, theme: variant.name, unseen }).toEqual({ path, theme: variant.name, unseen: [] });
      }
    }
  });

  /** Presses Tab until the focused element matches, as a keyboard user would reach it. */
  async function tabTo(page: Page, selector: string, limit = 80): Promise<void> {
    for (let i = 0; i < limit; i++) {
      await page.keyboard.press('Tab');
      if (await page.evaluate((s) => document.activeElement?.matches(s) ?? false, selector)) return;
    }
    throw new Error(`${selector} is not reached by ${limit} presses of Tab on ${page.url()}`);
  }

  it('skips to the content, then retries a failed job, with the keyboard alone', async () => {
    const page = await open(VARIANTS[0]);
    await page.goto(`${base}/jobs/${ids.failed}?queue=orders`);
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to content');
    await page.keyboard.press('Enter');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('main');
    await tabTo(page, 'button');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Retry');
    await Promise.all([page.waitForEvent('load'), page.keyboard.press('Enter')]);
    await waitFor(async () => {
      const { rows } = await dashboard!.sql.query(`SELECT state, jsonb_array_length(errors) AS errors FROM stampeded_jobs WHERE id = $1`, [ids.failed]);
      return rows[0].state === 'discarded' && rows[0].errors === 2;
    }, 'the retried job to run (and fail) again');
  });

  it('finds jobs and acts on every match of a filter with the keyboard alone', async () => {
    const page = await open(VARIANTS[0]);
    await page.goto(`${base}/jobs`);
    await tabTo(page, 'select[name=state]');
    await page.keyboard.type('discarded');
    await tabTo(page, 'form[role=search] button');
    await Promise.all([page.waitForEvent('load'), page.keyboard.press('Enter')]);
    expect(page.url()).toContain('state=discarded');
    await tabTo(page, 'a.button[href*="/bulk/cancel"]');
    await page.keyboard.press('Shift+Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Retry…');
    await Promise.all([page.waitForEvent('load'), page.keyboard.press('Enter')]);
    await tabTo(page, 'main button');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toMatch(/^Retry \d+ jobs$/);
    await Promise.all([page.waitForEvent('load'), page.keyboard.press('Space')]);
    await waitFor(async () => {
      const { rows } = await dashboard!.sql.query(`SELECT state, jsonb_array_length(errors) AS errors FROM stampeded_jobs WHERE id = $1`, [ids.failed]);
      return rows[0].state === 'discarded' && rows[0].errors === 3;
    }, 'the bulk retry to run the job a third time');
  });

  it('pauses and resumes a queue with the keyboard alone', async () => {
    const page = await open(VARIANTS[0]);
    const paused = async () =>
      (await dashboard!.sql.query(`SELECT coalesce((SELECT paused FROM stampeded_queue_policies WHERE queue = 'orders'), false) AS paused`)).rows[0].paused;
    await page.goto(base);
    await tabTo(page, 'form[action$="/queues/orders/pause"] button');
    await Promise.all([page.waitForEvent('load'), page.keyboard.press('Enter')]);
    expect(await paused()).toBe(true);
    await tabTo(page, 'form[action$="/queues/orders/resume"] button');
    await Promise.all([page.waitForEvent('load'), page.keyboard.press('Space')]);
    expect(await paused()).toBe(false);
  });

  it('switches the theme from the header by keyboard, and remembers it', async () => {
    const page = await open(VARIANTS[0]);
    await page.goto(`${base}/workers`);
    await tabTo(page, '#theme');
    expect(await page.evaluate(() => getComputedStyle(document.body).backgroundColor)).toBe('rgb(246, 247, 249)');
    // On a closed select, the arrow keys step through its options.
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowDown');
    expect(await page.inputValue('#theme')).toBe('dark');
    expect(await page.evaluate(() => document.documentElement.dataset.theme)).toBe('dark');
    await page.goto(`${base}/health`);
    expect(await page.evaluate(() => document.documentElement.dataset.theme)).toBe('dark');
    expect(await page.inputValue('#theme')).toBe('dark');
    expect(await page.evaluate(() => getComputedStyle(document.body).backgroundColor)).toBe('rgb(18, 21, 28)');
    expect(await axe(page)).toEqual([]);
  });
});

let releaseHeld = () => {};
const held = new Promise<void>((resolve) => (releaseHeld = resolve));

@Task('a11y-held', { queue: 'live' })
class Held implements TaskHandler {
  async handle() {
    await held;
  }
}

describeInChromium('a live page, to a keyboard and a screen reader', () => {
  let dashboard: DashboardInChromium | undefined;

  beforeAll(async () => {
    dashboard = await openDashboardInChromium({ providers: [Held], worker: { pollIntervalMs: 50 }, password: PASSWORD, refreshSeconds: 1 });
  });

  afterAll(async () => {
    releaseHeld();
    await dashboard?.close();
  });

  it('keeps the focus where it was across a refresh, and says when the job changes state, not before', async () => {
    const { app, sql, page, base } = dashboard!;
    const { id } = await app.get(QueueService).enqueue(Held, {});
    const state = async () => (await sql.query(`SELECT state FROM stampeded_jobs WHERE id = $1`, [id])).rows[0].state;
    await waitFor(async () => (await state()) === 'executing', 'the job to run');
    await page.goto(`${base}/stampeded/jobs/${id}?queue=live`);
    const swapped = async () => {
      await page.evaluate(() => (document.querySelector('main')!.dataset.seen = '1'));
      await page.waitForFunction(() => !document.querySelector('main')!.dataset.seen, undefined, { timeout: 10_000 });
    };
    for (let i = 0; i < 40 && !(await page.evaluate(() => document.activeElement?.textContent === 'Cancel')); i++) await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Cancel');
    await swapped();
    expect(
      await page.evaluate(() => [document.activeElement?.tagName, document.activeElement?.textContent, !!document.activeElement?.closest('main')]),
    ).toEqual(['BUTTON', 'Cancel', true]);
    // Nothing the page is about changed: nothing is said.
    expect(await page.textContent('#live-status')).toBe('');

    releaseHeld();
    await waitFor(async () => (await state()) === 'completed', 'the job to complete');
    await page.waitForFunction(() => document.querySelector('main')!.dataset.refresh === '0', undefined, { timeout: 10_000 });
    expect(await page.textContent('#live-status')).toBe('The job is completed');
  });
});
