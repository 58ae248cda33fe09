import type { INestApplication } from '@nestjs/common';
import type pg from 'pg';
import type { Page } from 'playwright-core';
import { QueueService, Task, UnrecoverableError, type JobContext, type TaskHandler } from '@stampeded/nestjs';
import { SCREENSHOTS, describeInChromium } from '../support/chromium.js';
import { openDashboardInChromium, type DashboardInChromium } from '../support/dashboard-in-chromium.js';
import { waitFor } from '../support/test-app.js';

// What a person finds at a first look, in Chromium: times people read, a
// finished job's page that says the true thing of its result, and a health
// page whose red means something is wrong.

@Task('quick', { queue: 'look' })
class Quick implements TaskHandler {
  async handle() {}
}

@Task('doomed', { queue: 'look' })
class Doomed implements TaskHandler {
  async handle() {
    throw new UnrecoverableError('the order was deleted');
  }
}

@Task('stuck', { queue: 'look' })
class Stuck implements TaskHandler {
  async handle(_args: object, ctx: JobContext) {
    await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
  }
}

describeInChromium('the dashboard at a first look', () => {
  let sql: pg.Client;
  let app: INestApplication;
  let base: string;
  let page: Page;
  let dashboard: DashboardInChromium | undefined;

  beforeAll(async () => {
    dashboard = await openDashboardInChromium({ providers: [Quick, Doomed, Stuck], worker: { pollIntervalMs: 100 }, password: 'first-look' });
    ({ sql, app, base, page } = dashboard);
  });

  afterAll(() => dashboard?.close());

  const stateOf = async (id: string) => (await sql.query(`SELECT state FROM stampeded_jobs WHERE id = $1`, [id])).rows[0]?.state;

  it('lists a finished job as how long ago it finished and how long it ran, the exact time in a <time> element', async () => {
    const { id } = await app.get(QueueService).enqueue('quick', {});
    await waitFor(async () => (await stateOf(id)) === 'completed', 'the job to complete');
    await page.goto(`${base}/stampeded/jobs?queue=look`);
    const row = page.locator('tbody tr', { has: page.locator(`a[href^="/stampeded/jobs/${id}"]`) });
    const headers = (await page.locator('thead th').allTextContents()).map((h) => h.trim().toLowerCase());
    const when = row.locator('td').nth(headers.indexOf('when'));
    expect((await when.textContent())!.trim()).toMatch(/^(just now|\d+ s ago), ran \d+(\.\d)? (ms|s)$/);
    const { rows } = await sql.query(`SELECT finished_at FROM stampeded_jobs WHERE id = $1`, [id]);
    const time = when.locator('time');
    expect(await time.getAttribute('datetime')).toBe(rows[0].finished_at.toISOString());
    expect(await time.getAttribute('title')).toBe(rows[0].finished_at.toISOString());
    // No raw timestamp left in the list.
    expect(await page.textContent('main table')).not.toMatch(/\d{4}-\d\d-\d\dT/);
    await page.screenshot({ path: `${SCREENSHOTS}/jobs-times.png`, fullPage: true });
  });

  it("says of a discarded or cancelled job's result that it has none, not that one is coming", async () => {
    const queue = app.get(QueueService);
    const doomed = await queue.enqueue('doomed', {});
    const stuck = await queue.enqueue('stuck', {});
    await waitFor(async () => (await stateOf(doomed.id)) === 'discarded' && (await stateOf(stuck.id)) === 'executing', 'one discarded, one running');
    await queue.cancel(stuck.id);
    for (const [id, state] of [
      [doomed.id, 'discarded'],
      [stuck.id, 'cancelled'],
    ]) {
      await page.goto(`${base}/stampeded/jobs/${id}?queue=look`);
      const said = (await page.textContent('h2:text-is("Result") + p'))!;
      expect(said).not.toContain('none yet');
      expect(said).toContain(`none: the job was ${state} without completing`);
    }
  });

  it('marks in red only a table autovacuum does not reach, not one due for its next round', async () => {
    await sql.query(`SELECT stampeded_create_queue('due'), stampeded_create_queue('neglected')`);
    await sql.query(`ALTER TABLE stampeded_jobs_neglected SET (autovacuum_enabled = false)`);
    for (const queue of ['due', 'neglected']) {
      // As the demo's emails partition: a few hundred rows, most of them dead, and no vacuum yet.
      await sql.query(`INSERT INTO stampeded_jobs_${queue} (queue, task) SELECT '${queue}', 'x' FROM generate_series(1, 400)`);
      await sql.query(`DELETE FROM stampeded_jobs_${queue} WHERE ctid IN (SELECT ctid FROM stampeded_jobs_${queue} LIMIT 300)`);
    }
    // PostgreSQL 15 and later flush a session's statistics on request; 14
    // sends them as the session goes idle, at most every half second, so the
    // wait below keeps this session busy.
    await sql.query(`DO $$ BEGIN IF to_regproc('pg_stat_force_next_flush') IS NOT NULL THEN PERFORM pg_stat_force_next_flush(); END IF; END $$`);
    const rowOf = (relname: string) =>
      page.locator('h2:text-is("Vacuum") + .scroll table tbody tr', { has: page.locator(`td:first-child:text-is("${relname}")`) });
    await waitFor(async () => {
      await sql.query('SELECT 1');
      await page.goto(`${base}/stampeded/health`);
      return (await rowOf('stampeded_jobs_neglected').textContent())?.includes('autovacuum is off');
    }, 'the dead tuples in the statistics');
    expect(await rowOf('stampeded_jobs_neglected').locator('.bad').count()).toBe(1);
    // Due (or, if autovacuum was quick, already vacuumed): either way not a warning.
    expect(await rowOf('stampeded_jobs_due').textContent()).toMatch(/due: autovacuum's next round vacuums it|not due/);
    expect(await rowOf('stampeded_jobs_due').locator('.bad').count()).toBe(0);
    await page.screenshot({ path: `${SCREENSHOTS}/health-vacuum.png`, fullPage: true });
  });
});
