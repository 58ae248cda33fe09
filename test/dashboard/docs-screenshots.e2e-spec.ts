import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { MaintenanceService, QueueControlService, QueueService, Task, type JobContext, type TaskHandler } from '@stampeded/nestjs';
import { StampededInspector } from '@stampeded/dashboard';
import { CHROMIUM, HAS_CHROMIUM, docsScreenshot } from '../support/chromium.js';
import { openDashboardInChromium, type DashboardInChromium } from '../support/dashboard-in-chromium.js';
import { dashboardPageRoutes } from '../support/dashboard-pages.js';
import { waitFor } from '../support/test-app.js';

// The screenshots in docs/dashboard.md, every one of them: `npm run
// docs:screenshots` runs this file alone and writes docs/images/. It sets a
// scene (queues with a history, a dead-lettered charge, a running report, a
// workflow whose failure cancelled two jobs, schedules, a paused queue, a
// capped queue and an open breaker) in a
// real app on a real PostgreSQL, then takes each shot of SHOTS. A view added
// to the dashboard gets a line in SHOTS and its image a line in the docs: the
// first two tests, which run everywhere, fail until it has both. The shots
// themselves are taken only by that script: they rewrite files under docs/.

const ENABLED = process.env.STAMPEDED_DOCS_SCREENSHOTS === '1' && HAS_CHROMIUM;

type Variant = { theme: 'light' | 'dark'; width: number };
const LIGHT: Variant = { theme: 'light', width: 1280 };
const DARK: Variant = { theme: 'dark', width: 1280 };
const PHONE: Variant = { theme: 'light', width: 375 };
const DARK_PHONE: Variant = { theme: 'dark', width: 375 };

/** What the scene made, for the shots' addresses. */
interface Scene {
  declined: string;
  report: string;
  workflow: string;
  workflowJob: string;
}

interface Shot {
  file: string;
  /** The pages controller's route it shows ('' is the queues page). */
  route: string;
  url: (scene: Scene) => string;
  variant: Variant;
  /** Scrolls to this before the shot, for a view far down its page. */
  scrollTo?: string;
  /** The whole page, not only the window's height of it (a long list is cut). */
  fullPage?: boolean;
}

const SHOTS: Shot[] = [
  { file: 'dashboard-queues.png', route: '', url: () => '', variant: LIGHT },
  { file: 'dashboard-queues-dark.png', route: '', url: () => '', variant: DARK },
  { file: 'dashboard-queues-phone.png', route: '', url: () => '', variant: PHONE },
  { file: 'dashboard-jobs.png', route: 'jobs', url: () => '/jobs', variant: LIGHT, fullPage: false },
  { file: 'dashboard-jobs-phone-dark.png', route: 'jobs', url: () => '/jobs?queue=payments', variant: DARK_PHONE, fullPage: false },
  { file: 'dashboard-search.png', route: 'jobs', url: () => `/jobs?queue=payments&args=${encodeURIComponent('{"orderId": 1042}')}`, variant: LIGHT },
  { file: 'dashboard-job.png', route: 'jobs/:id', url: (s) => `/jobs/${s.declined}?queue=payments`, variant: LIGHT },
  { file: 'dashboard-job-attempts.png', route: 'jobs/:id', url: (s) => `/jobs/${s.declined}?queue=payments`, variant: DARK },
  { file: 'dashboard-job-progress.png', route: 'jobs/:id', url: (s) => `/jobs/${s.report}?queue=reports`, variant: LIGHT },
  { file: 'dashboard-job-related.png', route: 'jobs/:id', url: (s) => `/jobs/${s.workflowJob}?queue=reports`, variant: LIGHT, scrollTo: '#related-heading' },
  { file: 'dashboard-bulk-confirm.png', route: 'bulk/:action', url: () => '/bulk/retry?queue=payments&state=discarded', variant: LIGHT },
  { file: 'dashboard-errors.png', route: 'errors', url: () => '/errors', variant: LIGHT },
  { file: 'dashboard-schedules.png', route: 'schedules', url: () => '/schedules', variant: DARK },
  { file: 'dashboard-workflows.png', route: 'workflows', url: () => '/workflows', variant: LIGHT },
  { file: 'dashboard-workflow-graph.png', route: 'workflows/:id', url: (s) => `/workflows/${s.workflow}`, variant: LIGHT },
  { file: 'dashboard-workflow-graph-dark.png', route: 'workflows/:id', url: (s) => `/workflows/${s.workflow}`, variant: DARK },
  { file: 'dashboard-queue-controls.png', route: 'queues/:queue', url: () => '/queues/payments', variant: LIGHT },
  { file: 'dashboard-workers.png', route: 'workers', url: () => '/workers', variant: LIGHT },
  { file: 'dashboard-insights.png', route: 'insights', url: () => '/insights', variant: LIGHT },
  { file: 'dashboard-health.png', route: 'health', url: () => '/health', variant: LIGHT },
];

/** An error whose stack names an app's file, not this checkout's path (which has no place in the docs). */
function failure(message: string, at: string): Error {
  const error = new Error(message);
  error.stack = `Error: ${message}\n    at ${at}`;
  return error;
}

/**
 * The docs' screenshots of a scene this file cannot set, each taken (with
 * docsScreenshot()) by the spec that can; `npm run docs:screenshots` runs
 * those specs too.
 */
const TAKEN_BY: Record<string, string> = {
  'dashboard-replica-lag.png': 'test/dashboard/replica.e2e-spec.ts',
  'dashboard-queue-policy-error.png': 'test/dashboard/queue-controls.e2e-spec.ts',
};

@Task('send-welcome-email', { queue: 'emails' })
class SendWelcomeEmail implements TaskHandler<{ to: string }> {
  async handle() {
    await new Promise((r) => setTimeout(r, 5 + Math.random() * 40));
  }
}

@Task('charge-card', { queue: 'payments', maxAttempts: 3, backoff: { baseMs: 300, maxMs: 600 }, deadLetterQueue: 'payments-dead' })
class ChargeCard implements TaskHandler<{ orderId: number; cents: number }> {
  async handle(args: { orderId: number; cents: number }) {
    await new Promise((r) => setTimeout(r, 20 + Math.random() * 30));
    if (args.cents > 100_000)
      throw failure(`card declined: insufficient funds for order ${args.orderId}`, 'ChargeCard.handle (src/payments/charge-card.task.ts:18:13)');
    return { charged: args.cents };
  }
}

let releaseReport = () => {};
const reportReleased = new Promise<void>((resolve) => (releaseReport = resolve));

@Task('generate-report', { queue: 'reports' })
class GenerateReport implements TaskHandler<{ pages: number }> {
  async handle(args: { pages: number }, ctx: JobContext) {
    ctx.log(`rendering ${args.pages} pages`);
    for (let page = 1; page <= 40; page++) ctx.log(`page ${page} rendered`);
    await ctx.progress({ done: 40, total: args.pages, stage: 'pages' });
    // Holds still, running, until the shots are taken.
    await Promise.race([reportReleased, new Promise((r) => ctx.signal.addEventListener('abort', r))]);
  }
}

@Task('build-step', { queue: 'reports' })
class BuildStep implements TaskHandler {
  async handle() {}
}

@Task('fetch-refunds', { queue: 'reports', maxAttempts: 1 })
class FetchRefunds implements TaskHandler {
  async handle(): Promise<void> {
    throw failure('refunds API answered 503 Service Unavailable', 'FetchRefunds.handle (src/reports/fetch-refunds.task.ts:9:11)');
  }
}

@Task('nightly-digest', { queue: 'reports', schedule: { cron: '0 3 * * *', timezone: 'Europe/Berlin', args: { scope: 'all' } } })
class NightlyDigest implements TaskHandler {
  async handle() {}
}

@Task('sync-crm', { queue: 'emails', schedule: { every: '15m' } })
class SyncCrm implements TaskHandler {
  async handle() {}
}

describe('the screenshots of docs/dashboard.md', () => {
  it('include a shot of every page the pages controller serves', () => {
    expect([...new Set(SHOTS.map((s) => s.route))].sort()).toEqual(dashboardPageRoutes());
  });

  it('are each shown in the docs, and the docs show no other', () => {
    const shown = [...readFileSync('docs/dashboard.md', 'utf8').matchAll(/\]\(images\/(dashboard-[^)]+\.png)\)/g)].map((m) => m[1]);
    expect(shown.sort()).toEqual([...SHOTS.map((s) => s.file), ...Object.keys(TAKEN_BY)].sort());
    const script = JSON.parse(readFileSync('package.json', 'utf8')).scripts['docs:screenshots'] as string;
    for (const [file, spec] of Object.entries(TAKEN_BY)) {
      expect(readFileSync(spec, 'utf8')).toContain(`docsScreenshot('${file}')`);
      expect(script).toContain(spec);
    }
  });
});

const describeWhenAsked = ENABLED ? describe : describe.skip;

describeWhenAsked(
  `the screenshots of docs/dashboard.md (${ENABLED ? CHROMIUM : 'skipped: `npm run docs:screenshots` takes them, with Chromium installed'})`,
  () => {
    let dashboard: DashboardInChromium | undefined;
    const scene = {} as Scene;

    beforeAll(async () => {
      dashboard = await openDashboardInChromium({
        providers: [SendWelcomeEmail, ChargeCard, GenerateReport, BuildStep, FetchRefunds, NightlyDigest, SyncCrm],
        worker: { pollIntervalMs: 50 },
        // The insights rollup reads a job as soon as it finished: the scene's history is read at once.
        stampeded: () => ({ maintenance: { insights: { settle: 1 } } }),
        password: 'screenshots',
      });
      const { app, sql } = dashboard;
      const queue = app.get(QueueService);
      await queue.enqueueMany(
        Array.from({ length: 120 }, (_, i) => ({
          task: SendWelcomeEmail,
          args: { to: `user${i}@example.com` },
          // The insights page's busiest tenants and destinations.
          options: { tenantId: ['acme', 'globex', 'globex', 'initech'][i % 4], destination: i % 5 ? 'smtp.example' : 'sms.example' },
        })),
      );
      const charges = await queue.enqueueMany(
        Array.from({ length: 24 }, (_, i) => ({ task: ChargeCard, args: { orderId: 1030 + i, cents: i === 12 ? 250_000 : 1999 + i * 100 } })),
      );
      scene.declined = charges[12].id;
      scene.report = (await queue.enqueue(GenerateReport, { pages: 200 })).id;
      const flow = await queue.enqueueWorkflow({
        name: 'nightly-report',
        jobs: [
          { name: 'orders', task: 'build-step', args: {} },
          { name: 'refunds', task: 'fetch-refunds', args: {} },
          { name: 'report', task: 'build-step', args: {}, dependsOn: ['orders', 'refunds'] },
          { name: 'archive', task: 'build-step', args: {}, dependsOn: ['report'] },
          { name: 'notify', task: 'build-step', args: {}, dependsOn: ['orders', { name: 'report', ignoreFailure: true }] },
        ],
      });
      scene.workflow = flow.id;
      scene.workflowJob = flow.jobs.report;
      await waitFor(async () => {
        const { rows } = await sql.query(
          `SELECT count(*) FILTER (WHERE state NOT IN ('completed', 'discarded', 'cancelled'))::int AS open FROM stampeded_jobs WHERE queue <> 'payments-dead'`,
        );
        return rows[0].open === 1; // the report, held running
      }, 'every job but the report to finish');
      // An hour of history for the throughput chart: the emails finished over it.
      await sql.query(`UPDATE stampeded_jobs SET finished_at = now() - random() * interval '55 minutes' WHERE queue = 'emails' AND state = 'completed'`);
      await sql.query(
        `UPDATE stampeded_jobs SET claimed_at = finished_at - random() * interval '40 milliseconds' WHERE queue = 'emails' AND state = 'completed'`,
      );
      await sql.query(`UPDATE stampeded_jobs SET scheduled_at = claimed_at - random() * interval '3 seconds' WHERE queue = 'emails' AND state = 'completed'`);
      // The insights charts read the rollup: it reads the history afresh, as it now stands,
      // the leader's own run held off by the watermark's lock meanwhile.
      await sql.query('BEGIN');
      await sql.query(`SELECT 1 FROM stampeded_insights_watermark FOR UPDATE`);
      await sql.query(`DELETE FROM stampeded_insights; DELETE FROM stampeded_insight_keys; UPDATE stampeded_insights_watermark SET finished_at = NULL`);
      await sql.query('COMMIT');
      await app.get(MaintenanceService).run('insights');
      await app.get(StampededInspector).pauseQueue('emails', 'ops (dashboard)', 'migrating the mail provider');
      // The payments queue's page: a cap an operator set, and a partner's breaker open.
      const control = app.get(QueueControlService);
      await control.setPolicy('payments', { maxRunning: 8, maxWaitSecs: 120 }, { by: 'ana (dashboard)' });
      await control.openBreaker('api.stripe.com', { for: '10m', by: 'on-call', reason: 'partner answered 503 five times' });
    });

    afterAll(async () => {
      releaseReport();
      await dashboard?.close();
    });

    it('takes every shot', async () => {
      const pages = new Map<string, Page>();
      for (const shot of SHOTS) {
        const key = `${shot.variant.theme}-${shot.variant.width}`;
        if (!pages.has(key)) {
          const context = await dashboard!.browser.newContext({
            httpCredentials: { username: 'ops', password: 'screenshots' },
            viewport: { width: shot.variant.width, height: shot.variant.width < 600 ? 812 : 860 },
            colorScheme: shot.variant.theme,
          });
          pages.set(key, await context.newPage());
        }
        const page = pages.get(key)!;
        const response = await page.goto(`${dashboard!.base}/stampeded${shot.url(scene)}`);
        expect(response?.status()).toBe(200);
        if (shot.scrollTo) await page.locator(shot.scrollTo).scrollIntoViewIfNeeded();
        await page.screenshot({ path: docsScreenshot(shot.file), fullPage: shot.fullPage ?? !shot.scrollTo });
      }
      for (const page of pages.values()) await page.context().close();
    });
  },
);
