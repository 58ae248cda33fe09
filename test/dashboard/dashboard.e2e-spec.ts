import { Injectable, Module, type CanActivate, type ExecutionContext, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { MaintenanceService, QueueControlService, QueueService, StampededModule, Task, type TaskHandler } from '@stampeded/nestjs';
import { DashboardConfigError, StampededDashboardModule } from '@stampeded/dashboard';
import type { TestDatabase } from '@stampeded/testing';
import { sqlClient, testDatabase, waitFor } from '../support/test-app.js';

const upstream = { healthy: false };

@Task('sync-order', { queue: 'work', maxAttempts: 1, deadLetterQueue: 'work-dead' })
class SyncOrder implements TaskHandler<{ order: number }> {
  async handle(args: { order: number }) {
    if (!upstream.healthy) throw new Error(`upstream 503 for order ${args.order}`);
  }
}

/** A guard of the app's own, with an injected dependency, as a user would write one. */
@Injectable()
class TeamGuard implements CanActivate {
  constructor(private readonly queue: QueueService) {}
  canActivate(context: ExecutionContext): boolean {
    return Boolean(this.queue) && context.switchToHttp().getRequest().headers['x-team'] === 'ops';
  }
}

/** fetch's Response, with the JSON these tests read typed loosely, as a script would. */
type JsonResponse = Omit<Response, 'json'> & { json(): Promise<any> };
const request = (url: string, init?: RequestInit): Promise<JsonResponse> => fetch(url, init);

const BASIC = `Basic ${Buffer.from('ops:s3cret').toString('base64')}`;

describe('dashboard', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let base: string;
  let sql: pg.Client;
  let queue: QueueService;

  beforeAll(async () => {
    db = await testDatabase();
    @Module({
      imports: [
        StampededModule.forRoot({ connection: { url: db.url }, migrations: 'auto', worker: { pollIntervalMs: 100, queues: ['work'] } }),
        StampededDashboardModule.forRoot({ path: '/stampeded', auth: { username: 'ops', password: 's3cret' }, refreshSeconds: 0 }),
        StampededDashboardModule.forRoot({ path: '/by-function', auth: (request) => request.headers['x-team'] === 'ops' }),
        StampededDashboardModule.forRoot({ path: '/by-guard', auth: TeamGuard }),
        StampededDashboardModule.forRoot({ path: '/read-only', auth: { username: 'ops', password: 's3cret' }, readOnly: true }),
      ],
      providers: [SyncOrder],
    })
    class DashboardTestModule {}
    app = await NestFactory.create(DashboardTestModule, { logger: ['error', 'warn'] });
    await app.listen(0, '127.0.0.1');
    base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    sql = await sqlClient(db.url);
    queue = app.get(QueueService);

    await queue.enqueueMany([1, 2, 3].map((order) => ({ task: 'sync-order', args: { order } })));
    await waitFor(async () => (await sql.query(`SELECT 1 FROM stampeded_jobs WHERE queue = 'work-dead'`)).rowCount === 3, 'three dead letters');
    await queue.enqueueMany(
      Array.from({ length: 12 }, (_, i) => ({ task: 'newsletter', args: { i }, options: { queue: 'mail', tenantId: i < 4 ? 'acme' : 'globex' } })),
    );
  });

  afterAll(async () => {
    await sql?.end();
    await app?.close();
    await db?.drop();
  });

  const get = (path: string, headers: Record<string, string> = { authorization: BASIC }) => request(`${base}${path}`, { headers, redirect: 'manual' });

  /** The CSRF token and the cookie it pairs with, as a script would get them. */
  async function csrf(prefix = '/stampeded', headers: Record<string, string> = { authorization: BASIC }) {
    const response = await get(`${prefix}/api/csrf`, headers);
    const cookie = response.headers
      .getSetCookie()
      .find((c) => c.startsWith('stampeded_csrf='))!
      .split(';')[0];
    const { token } = await response.json();
    return { token: token as string, cookie };
  }

  async function post(path: string, body: unknown = {}, options: { prefix?: string; headers?: Record<string, string> } = {}) {
    const auth = options.headers ?? { authorization: BASIC };
    const { token, cookie } = await csrf(options.prefix, auth);
    return request(`${base}${path}`, {
      method: 'POST',
      headers: { ...auth, cookie, 'x-stampeded-csrf': token, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      redirect: 'manual',
    });
  }

  describe('is closed by default', () => {
    it('refuses to start without auth, with empty credentials, or with an unknown option', () => {
      expect(() => StampededDashboardModule.forRoot({} as any)).toThrow(DashboardConfigError);
      expect(() => StampededDashboardModule.forRoot({} as any)).toThrow(/needs an auth setting/);
      expect(() => StampededDashboardModule.forRoot({ auth: { username: 'ops', password: '' } })).toThrow(/empty username or password/);
      expect(() => StampededDashboardModule.forRoot({ auth: { user: 'x' } as any })).toThrow(/auth must be/);
      expect(() => StampededDashboardModule.forRoot({ auth: () => true, pth: '/x' } as any)).toThrow(/unknown option\(s\) pth/);
      expect(() => StampededDashboardModule.forRoot({ auth: () => true, path: 'no-slash' })).toThrow(/path must be a URL path/);
    });

    it('asks for basic credentials, and refuses wrong ones', async () => {
      const anonymous = await get('/stampeded', {});
      expect(anonymous.status).toBe(401);
      expect(anonymous.headers.get('www-authenticate')).toMatch(/^Basic realm="Stampeded"/);
      expect((await get('/stampeded/api/queues', { authorization: `Basic ${Buffer.from('ops:guess').toString('base64')}` })).status).toBe(401);
      expect((await get('/stampeded/api/queues')).status).toBe(200);
    });

    it('lets a function or a guard class of the app decide', async () => {
      expect((await get('/by-function/api/queues', {})).status).toBe(401);
      expect((await get('/by-function/api/queues', { 'x-team': 'ops' })).status).toBe(200);
      expect((await get('/by-guard/api/queues', { 'x-team': 'sales' })).status).toBe(403);
      expect((await get('/by-guard/jobs', { 'x-team': 'ops' })).status).toBe(200);
    });
  });

  describe('protects state-changing actions', () => {
    it('refuses a change without the CSRF token, with a token that does not match its cookie, or from another origin', async () => {
      const [job] = (await (await get('/stampeded/api/jobs?queue=mail&limit=1')).json()).jobs;
      const url = `${base}/stampeded/api/jobs/${job.id}/cancel`;
      expect((await request(url, { method: 'POST', headers: { authorization: BASIC } })).status).toBe(403);
      const { token, cookie } = await csrf();
      const other = await csrf();
      expect((await request(url, { method: 'POST', headers: { authorization: BASIC, cookie: other.cookie, 'x-stampeded-csrf': token } })).status).toBe(403);
      expect(
        (await request(url, { method: 'POST', headers: { authorization: BASIC, cookie, 'x-stampeded-csrf': token, origin: 'https://evil.example' } })).status,
      ).toBe(403);
      const { rows } = await sql.query(`SELECT state FROM stampeded_jobs WHERE id = $1`, [job.id]);
      expect(rows[0].state).toBe('available');
    });

    it('issues the token in an HttpOnly, SameSite=Strict cookie scoped to the dashboard path, and embeds it in forms', async () => {
      const page = await get('/stampeded');
      const cookie = page.headers.getSetCookie().find((c) => c.startsWith('stampeded_csrf='))!;
      expect(cookie).toMatch(/Path=\/stampeded; HttpOnly; SameSite=Strict/);
      const token = cookie.split(';')[0].split('=')[1];
      expect(await page.text()).toContain(`name="_csrf" value="${token}"`);
      expect(page.headers.get('content-security-policy')).toMatch(/default-src 'none'.*frame-ancestors 'none'/);
    });

    it('allows two scripts, the theme and the live refresh, by their hashes; the refresh on live pages only', async () => {
      // The '/by-function' mount refreshes every 5 seconds (the default); '/stampeded' not at all.
      const asOps = { 'x-team': 'ops' };
      const scriptsOf = (html: string) => [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1]);
      const sha = (script: string) => `'sha256-${createHash('sha256').update(script).digest('base64')}'`;
      for (const path of ['/by-function', '/by-function/jobs?queue=mail']) {
        const response = await get(path, asOps);
        const html = await response.text();
        const scripts = scriptsOf(html);
        expect(scripts).toHaveLength(2);
        expect(html).not.toMatch(/<script[^>]*src=/);
        const policy = response.headers.get('content-security-policy')!;
        expect(policy).toContain(`script-src ${scripts.map(sha).join(' ')};`);
        expect(policy).toContain("connect-src 'self';");
        expect(html).toContain('data-refresh="5"');
        // Without the script, the page reloads itself as a whole.
        expect(html).toContain('<noscript><meta http-equiv="refresh" content="5"></noscript>');
      }
      for (const path of ['/stampeded', '/stampeded/jobs', '/by-function/errors']) {
        const response = await get(path, path.startsWith('/by-function') ? asOps : undefined);
        const html = await response.text();
        // The theme script alone, the same one the policy allows everywhere.
        const scripts = scriptsOf(html);
        expect(scripts).toHaveLength(1);
        expect(response.headers.get('content-security-policy')).toContain(sha(scripts[0]));
        expect(html).not.toContain('id="live"');
        expect(html).toContain('data-refresh="0"');
      }
    });

    it('answers 403 to every action in read-only mode, and shows no buttons', async () => {
      const [job] = (await (await get('/read-only/api/jobs?queue=work')).json()).jobs;
      const response = await post(`/read-only/api/jobs/${job.id}/retry?queue=work`, {}, { prefix: '/read-only' });
      expect(response.status).toBe(403);
      expect((await response.json()).message).toMatch(/read-only/);
      const page = await (await get(`/read-only/jobs/${job.id}?queue=work`)).text();
      expect(page).toContain('upstream 503 for order');
      expect(page).not.toContain('<button');
      for (const path of ['/read-only/api/bulk/retry', '/read-only/actions/bulk/retry']) {
        expect((await post(path, { queue: 'work' }, { prefix: '/read-only' })).status).toBe(403);
      }
      const list = await (await get('/read-only/jobs?queue=work')).text();
      expect(list).toContain('upstream 503 for order');
      expect(list).not.toContain('/bulk/');
      expect((await sql.query(`SELECT state FROM stampeded_jobs WHERE id = $1`, [job.id])).rows[0].state).toBe('discarded');
    });
  });

  describe('JSON API', () => {
    it('reports queues from the counters, with the last hour of throughput', async () => {
      const { queues, throughput } = await (await get('/stampeded/api/queues')).json();
      const work = queues.find((q: any) => q.queue === 'work');
      expect(work.counts).toMatchObject({ discarded: 3 });
      expect(queues.find((q: any) => q.queue === 'mail').counts.available).toBe(12);
      expect(throughput).toHaveLength(60);
      expect(throughput.reduce((n: number, b: any) => n + b.finished, 0)).toBe(3);
    });

    it('pages through jobs with a keyset cursor, each job once, with filters', async () => {
      const ids: string[] = [];
      let next: string | null = null;
      do {
        const page: any = await (await get(`/stampeded/api/jobs?queue=mail&limit=5${next ? `&after=${next}` : ''}`)).json();
        ids.push(...page.jobs.map((j: any) => j.id));
        next = page.next;
      } while (next);
      expect(new Set(ids).size).toBe(12);
      expect([...ids]).toEqual([...ids].sort().reverse());
      expect((await (await get('/stampeded/api/jobs?tenant=acme')).json()).jobs).toHaveLength(4);
      expect((await (await get('/stampeded/api/jobs?state=discarded&task=sync-order')).json()).jobs).toHaveLength(3);
      const bad = await get('/stampeded/api/jobs?state=sleeping');
      expect(bad.status).toBe(400);
      expect((await bad.json()).message).toMatch(/state must be one of/);
      expect((await get('/stampeded/api/jobs?after=garbage')).status).toBe(400);
      const badScan = await get('/stampeded/api/jobs?task=newsletter&scan=lots');
      expect(badScan.status).toBe(400);
      expect((await badScan.json()).message).toMatch(/scan is how many jobs .* from 1 to 100,000; got "lots"/);
      expect((await get('/stampeded/api/jobs?task=newsletter&scan=0')).status).toBe(400);
    });

    it('groups failing jobs by error fingerprint, order numbers normalised out', async () => {
      const errors = await (await get('/stampeded/api/errors')).json();
      expect(errors).toHaveLength(1);
      expect(errors[0]).toMatchObject({
        jobs: 3,
        discarded: 3,
        queues: ['work'],
        tasks: ['sync-order'],
        failure_kinds: ['raised'],
        example_error: expect.stringMatching(/^Error: upstream 503 for order \d\n/),
      });
      expect(errors[0].fingerprint).toMatch(/^[0-9a-f]{64}$/);
    });

    it('shows workers with their heartbeat and running jobs, and health', async () => {
      const { workers } = await (await get('/stampeded/api/workers')).json();
      expect(workers).toHaveLength(1);
      expect(workers[0]).toMatchObject({ pid: process.pid, queues: ['work'], running: 0 });
      const health = await (await get('/stampeded/api/health')).json();
      expect(health.server.num).toBeGreaterThanOrEqual(140000);
      expect(health.partitions.length).toBeGreaterThan(0);
      // The app's own StampededModule leads maintenance.
      expect(health.maintenanceLeader).toBe(true);
    });

    it('pauses and resumes a queue and a schedule', async () => {
      const paused = await post('/stampeded/api/queues/mail/pause', { reason: 'migrating' });
      expect(paused.status).toBe(200);
      expect(await paused.json()).toMatchObject({
        queue: 'mail',
        paused: true,
        paused_by: 'ops (dashboard)',
        pause_reason: 'migrating',
      });
      expect((await (await get('/stampeded/api/queues')).json()).queues.find((q: any) => q.queue === 'mail')).toMatchObject({
        paused: true,
        pausedBy: 'ops (dashboard)',
        pauseReason: 'migrating',
        pausedAt: expect.any(String),
      });
      expect((await post('/stampeded/api/queues/mail/resume')).status).toBe(200);
      expect((await sql.query(`SELECT paused, paused_by FROM stampeded_queue_policies WHERE queue = 'mail'`)).rows[0]).toEqual({
        paused: false,
        paused_by: null,
      });

      await sql.query(
        `INSERT INTO stampeded_schedules (key, queue, task, interval_secs, timezone) VALUES ('hourly-report', 'mail', 'report', 3600, 'Asia/Tokyo')`,
      );
      expect((await post('/stampeded/api/schedules/hourly-report/pause')).status).toBe(200);
      expect((await sql.query(`SELECT paused FROM stampeded_schedules WHERE key = 'hourly-report'`)).rows[0].paused).toBe(true);
      expect((await post('/stampeded/api/schedules/no-such/pause')).status).toBe(404);
      const triggered = await (await post('/stampeded/api/schedules/hourly-report/trigger')).json();
      expect(triggered.job.queue).toBe('mail');
      expect((await sql.query(`SELECT task FROM stampeded_jobs WHERE id = $1`, [triggered.job.id])).rows[0].task).toBe('report');
      const page = await (await get('/stampeded/schedules')).text();
      expect(page).toContain('hourly-report');
      expect(page).toContain('Asia/Tokyo');
    });
  });

  describe('job actions', () => {
    it('retries a failed job from its page and the worker completes it', async () => {
      const [job] = (await (await get('/stampeded/api/jobs?queue=work&state=discarded&limit=1')).json()).jobs;
      const detail = await (await get(`/stampeded/api/jobs/${job.id}?queue=work`)).json();
      expect(detail).toMatchObject({ state: 'discarded', failure_kind: 'raised', errors: [expect.objectContaining({ kind: 'raised', attempt: 1 })] });
      expect(detail.attempted_by).toHaveLength(1);

      upstream.healthy = true;
      // As the page's button does it: a form post with the token in a field, answered with a redirect back.
      const page = await get(`/stampeded/jobs/${job.id}?queue=work`);
      const cookie = page.headers
        .getSetCookie()
        .find((c) => c.startsWith('stampeded_csrf='))!
        .split(';')[0];
      const html = await page.text();
      const token = /name="_csrf" value="([^"]+)"/.exec(html)![1];
      expect(html).toMatch(/<button type="submit">Retry<\/button>/);
      const form = new URLSearchParams({ _csrf: token, _back: `/stampeded/jobs/${job.id}?queue=work` });
      const retried = await request(`${base}/stampeded/actions/jobs/${job.id}/retry?queue=work`, {
        method: 'POST',
        headers: { authorization: BASIC, cookie, 'content-type': 'application/x-www-form-urlencoded' },
        body: form,
        redirect: 'manual',
      });
      expect(retried.status).toBe(303);
      expect(retried.headers.get('location')).toBe(`/stampeded/jobs/${job.id}?queue=work`);
      await waitFor(
        async () => (await sql.query(`SELECT state FROM stampeded_jobs WHERE id = $1`, [job.id])).rows[0].state === 'completed',
        'the retried job to complete',
      );
    });

    it('never redirects off the dashboard', async () => {
      const [job] = (await (await get('/stampeded/api/jobs?queue=mail&limit=1')).json()).jobs;
      const { token, cookie } = await csrf();
      for (const back of ['https://evil.example/', '//evil.example/x', '/elsewhere']) {
        const response = await request(`${base}/stampeded/actions/jobs/${job.id}/run?queue=mail`, {
          method: 'POST',
          headers: { authorization: BASIC, cookie, 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ _csrf: token, _back: back }),
          redirect: 'manual',
        });
        expect(response.status).toBe(303);
        expect(response.headers.get('location')).toBe('/stampeded');
      }
    });

    it('cancels, discards and runs now, answering 409 when the action does not apply and 404 for no such job', async () => {
      const { jobs } = await (await get('/stampeded/api/jobs?queue=mail&limit=3')).json();
      const cancel = await post(`/stampeded/api/jobs/${jobs[0].id}/cancel?queue=mail`);
      expect(cancel.status).toBe(200);
      expect(await cancel.json()).toMatchObject({ previousState: 'available', state: 'cancelled', changed: true });
      const again = await post(`/stampeded/api/jobs/${jobs[0].id}/cancel?queue=mail`);
      expect(again.status).toBe(409);
      expect((await again.json()).message).toMatch(/is cancelled/);

      expect(await (await post(`/stampeded/api/jobs/${jobs[1].id}/discard`)).json()).toMatchObject({ state: 'discarded' });
      const { rows } = await sql.query(`SELECT state, last_error FROM stampeded_jobs WHERE id = $1`, [jobs[1].id]);
      expect(rows[0]).toEqual({ state: 'discarded', last_error: 'discarded by ops (dashboard)' });

      await sql.query(`UPDATE stampeded_jobs SET scheduled_at = now() + interval '1 day' WHERE id = $1`, [jobs[2].id]);
      expect((await post(`/stampeded/api/jobs/${jobs[2].id}/run?queue=mail`)).status).toBe(200);
      const { rows: ran } = await sql.query(`SELECT scheduled_at <= now() AS due FROM stampeded_jobs WHERE id = $1`, [jobs[2].id]);
      expect(ran[0].due).toBe(true);

      expect((await post(`/stampeded/api/jobs/01a2372e-0000-7000-8000-000000000000/retry`)).status).toBe(404);
      expect((await post(`/stampeded/api/jobs/not-a-uuid/retry`)).status).toBe(400);
      expect((await post(`/stampeded/api/jobs/${jobs[2].id}/explode`)).status).toBe(404);
    });

    it("shows a debounce follow-up as waiting behind its scope's running job", async () => {
      const dedup = { scope: 'digest:9', mode: 'replace' } as const;
      const running = await queue.enqueue('digest', { n: 1 }, { queue: 'digests', dedup });
      const worker = (await sql.query(`INSERT INTO stampeded_workers (hostname, pid) VALUES ('test', 1) RETURNING id::text`)).rows[0].id;
      await sql.query(`SELECT * FROM stampeded_claim_batch('digests', $1, 1)`, [worker]);
      const followUp = await queue.enqueue('digest', { n: 2 }, { queue: 'digests', dedup });
      expect(followUp.runsAfter).toBe(running.id);
      const html = await (await get(`/stampeded/jobs/${followUp.id}?queue=digests`)).text();
      expect(html).toMatch(new RegExp(`digest:9: waits behind <a href="/stampeded/jobs/${running.id}\\?queue=digests"[^>]*>`));
      expect(await (await get(`/stampeded/api/jobs/${followUp.id}?queue=digests`)).json()).toMatchObject({ state: 'pending', dedup_follows: running.id });
    });

    it('offers a redrive button on a dead-letter queue listing', async () => {
      const html = await (await get('/stampeded/jobs?queue=work-dead')).text();
      expect(html).toContain('action="/stampeded/actions/dlq/work-dead/redrive"');
      expect(await (await get('/stampeded/jobs?queue=mail')).text()).not.toContain('/actions/dlq/');
    });

    it('retries, cancels and discards the jobs matching a filter, in bounded batches, with a dry run first', async () => {
      // Nobody works the 'bulk' queue: what the actions leave stays put.
      await sql.query(
        `INSERT INTO stampeded_jobs (queue, task, state, attempt, finished_at, last_error, tenant_id)
         SELECT 'bulk', 'import', 'discarded', 3, now(), 'row ' || i || ' rejected', CASE WHEN i <= 7 THEN 'acme' ELSE 'globex' END
           FROM generate_series(1, 9) i
         UNION ALL SELECT 'bulk', 'import', 'completed', 1, now(), NULL, 'acme' FROM generate_series(1, 2)`,
      );
      const states = async () =>
        Object.fromEntries(
          (await sql.query(`SELECT state, count(*)::int AS n FROM stampeded_jobs WHERE queue = 'bulk' GROUP BY state`)).rows.map((r) => [r.state, r.n]),
        );

      const dry = await (await post('/stampeded/api/bulk/retry', { queue: 'bulk', tenant: 'acme', dryRun: true })).json();
      expect(dry).toEqual({ action: 'retry', matched: 7, changed: 0, batches: 0, truncated: false });
      expect(await states()).toEqual({ discarded: 9, completed: 2 });

      const retried = await post('/stampeded/api/bulk/retry', { queue: 'bulk', tenant: 'acme', batchSize: 3 });
      expect(retried.status).toBe(200);
      expect(await retried.json()).toEqual({ action: 'retry', changed: 7, batches: 3, truncated: false });
      expect(await states()).toEqual({ available: 7, discarded: 2, completed: 2 });
      expect((await sql.query(`SELECT 1 FROM stampeded_jobs WHERE queue = 'bulk' AND state = 'available' AND tenant_id = 'acme'`)).rowCount).toBe(7);

      // A limit stops it part way, and says so.
      expect(await (await post('/stampeded/api/bulk/discard', { queue: 'bulk', state: 'available', batchSize: 2, limit: 3 })).json()).toEqual({
        action: 'discard',
        changed: 3,
        batches: 2,
        truncated: true,
      });
      expect(await (await post('/stampeded/api/bulk/cancel', { queue: 'bulk', batchSize: 2 })).json()).toEqual({
        action: 'cancel',
        changed: 4,
        batches: 3,
        truncated: false,
      });
      expect(await states()).toEqual({ discarded: 5, cancelled: 4, completed: 2 });
      const discarded = await sql.query(`SELECT last_error FROM stampeded_jobs WHERE queue = 'bulk' AND state = 'discarded' AND tenant_id = 'acme'`);
      expect(discarded.rows.map((r) => r.last_error)).toEqual(Array(3).fill('discarded by ops (dashboard)'));
      // A state the action does not apply to matches nothing.
      expect(await (await post('/stampeded/api/bulk/retry', { queue: 'bulk', state: 'completed' })).json()).toMatchObject({ changed: 0 });

      // Bad input is refused before anything is written; so is a post without the CSRF token.
      const bad = await post('/stampeded/api/bulk/delete', { queue: 'bulk' });
      expect(bad.status).toBe(400);
      expect((await bad.json()).message).toBe('No bulk action "delete": use one of retry, cancel, discard.');
      const badSize = await post('/stampeded/api/bulk/retry', { queue: 'bulk', batchSize: 0 });
      expect(badSize.status).toBe(400);
      expect((await badSize.json()).message).toMatch(/batchSize must be a whole number from 1 to 5,000; got 0/);
      const forged = await request(`${base}/stampeded/api/bulk/retry`, {
        method: 'POST',
        headers: { authorization: BASIC, 'content-type': 'application/json' },
        body: JSON.stringify({ queue: 'bulk' }),
      });
      expect(forged.status).toBe(403);
      expect(await states()).toEqual({ discarded: 5, cancelled: 4, completed: 2 });
    });

    it('redrives a dead-letter queue, with a dry run first', async () => {
      const dry = await (await post('/stampeded/api/dlq/work-dead/redrive', { dryRun: true })).json();
      expect(dry).toMatchObject({ dryRun: true, moved: 3, bySource: [{ sourceQueue: 'work', task: 'sync-order', jobs: 3 }] });
      const done = await (await post('/stampeded/api/dlq/work-dead/redrive', { task: 'sync-order' })).json();
      expect(done).toMatchObject({ dryRun: false, moved: 3 });
      // Back on their source queue, where the now-healthy upstream completes them.
      await waitFor(
        async () => (await sql.query(`SELECT 1 FROM stampeded_jobs WHERE queue = 'work' AND state = 'completed'`)).rowCount === 4,
        'the redriven jobs to complete',
      );
      expect((await sql.query(`SELECT 1 FROM stampeded_jobs WHERE queue = 'work-dead'`)).rowCount).toBe(0);
    });
  });

  describe('queue pause, as the runtime reads it', () => {
    it('is an operator hold that queue control recognises, and resuming lets the worker run the queue', async () => {
      expect((await post('/stampeded/api/queues/work/pause', { reason: 'incident 42' })).status).toBe(200);
      const control = app.get(QueueControlService);
      expect(await control.policy('work')).toMatchObject({ paused: true, pausedBy: 'ops (dashboard)', pauseReason: 'incident 42' });
      // The planner holds the paused queue, saying who paused it and why.
      await app.get(MaintenanceService).run('planner');
      expect(await control.policy('work')).toMatchObject({ verdict: 'hold', reason: 'paused by ops (dashboard): incident 42' });
      const { id } = await queue.enqueue('sync-order', { order: 7 });
      expect((await post('/stampeded/api/queues/work/resume')).status).toBe(200);
      expect((await control.policy('work'))?.paused).toBe(false);
      await waitFor(
        async () => (await sql.query(`SELECT state FROM stampeded_jobs WHERE id = $1`, [id])).rows[0].state === 'completed',
        'the job of the resumed queue to complete',
      );
    });
  });

  describe('pages', () => {
    it('renders queues with counts, verdicts and the throughput chart', async () => {
      const response = await get('/stampeded');
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^text\/html/);
      const html = await response.text();
      expect(html).toMatch(/<a href="\/stampeded\/queues\/mail" title="its jobs, pause, policy and breakers">mail<\/a>/);
      expect(html).toMatch(/<svg class="chart" role="img" aria-label="\d+ jobs finished in the last hour"/);
      // The theme's script alone: this mount does not refresh.
      expect(html.match(/<script/g)).toHaveLength(1);
    });

    it("shows a paused queue's pause with a Resume button, and a held one's verdict with a Pause button", async () => {
      await post('/stampeded/api/queues/mail/pause', { reason: 'migrating <now>' });
      await sql.query(`INSERT INTO stampeded_queue_policies (queue, verdict, reason, decided_at) VALUES ('at-cap', 'hold', 'max_running: test', now())`);
      try {
        const html = await (await get('/stampeded')).text();
        const row = (queue: string) => html.split('<tr>').find((r) => r.includes(`>${queue}</a>`))!;
        expect(row('mail')).toContain('<span class="tag hold">paused</span> <span class="dim">by ops (dashboard): migrating &lt;now&gt;</span>');
        expect(row('mail')).toContain('/actions/queues/mail/resume');
        expect(row('at-cap')).toContain('<span class="tag hold">hold</span> <span class="dim">max_running: test</span>');
        expect(row('at-cap')).toContain('/actions/queues/at-cap/pause');
      } finally {
        await post('/stampeded/api/queues/mail/resume');
        await sql.query(`DELETE FROM stampeded_queue_policies WHERE queue = 'at-cap'`);
      }
    });

    it("shows a job's progress, with a bar when it reads as a fraction, and its result, on its page and in the JSON API", async () => {
      const insert = async (values: string) =>
        (
          await sql.query(
            `INSERT INTO stampeded_jobs (queue, task, state, attempt, claimed_by, claimed_at, heartbeat_at, finished_at, progress, result)
             VALUES ${values} RETURNING id::text`,
          )
        ).rows[0].id as string;
      const running = await insert(
        `('reports', 'render', 'executing', 1, uuidv7(), now(), now(), NULL, '{"done": 40, "total": 200, "stage": "<b>pages</b>"}', NULL)`,
      );
      const done = await insert(
        `('reports', 'render', 'completed', 1, NULL, now(), now(), now(), '100', '{"url": "https://files/r.pdf?a=1&b=<2>", "pages": 3}')`,
      );
      const none = await insert(`('reports', 'render', 'completed', 1, NULL, now(), now(), now(), NULL, NULL)`);

      // The '/by-function' mount refreshes its pages every 5 seconds (the
      // default). jsonb keeps an object's keys shortest first.
      const asOps = { 'x-team': 'ops' };
      const runningPage = await (await get(`/by-function/jobs/${running}`, asOps)).text();
      expect(runningPage).toContain(
        '<progress max="1" value="0.2">20%</progress> <code>{&quot;done&quot;:40,&quot;stage&quot;:&quot;&lt;b&gt;pages&lt;/b&gt;&quot;,&quot;total&quot;:200}</code>',
      );
      expect(runningPage).toContain('<h2>Result</h2><p class="dim">none yet: stored when the job completes</p>');
      // A running job's page reloads itself, for its progress; a finished one's does not.
      expect(runningPage).toContain('<meta http-equiv="refresh" content="5">');

      const donePage = await (await get(`/by-function/jobs/${done}`, asOps)).text();
      expect(donePage).toContain('<progress max="1" value="1">100%</progress> <code>100</code>');
      expect(donePage).toContain(
        '<h2>Result</h2><pre tabindex="0">{\n  &quot;url&quot;: &quot;https://files/r.pdf?a=1&amp;b=&lt;2&gt;&quot;,\n  &quot;pages&quot;: 3\n}</pre>',
      );
      expect(donePage).not.toContain('http-equiv="refresh"');
      const nonePage = await (await get(`/by-function/jobs/${none}`, asOps)).text();
      expect(nonePage).toContain('<p class="dim">none: the handler returned nothing, or its task does not store results</p>');
      expect(nonePage).toMatch(/<tr><th scope="row">progress<\/th><td><span class="dim">[^<]*<\/span><\/td><\/tr>/);

      expect(await (await get(`/stampeded/api/jobs/${done}`)).json()).toMatchObject({
        state: 'completed',
        progress: 100,
        result: { url: 'https://files/r.pdf?a=1&b=<2>', pages: 3 },
      });
      expect(await (await get(`/stampeded/api/jobs/${running}`)).json()).toMatchObject({ progress: { done: 40, total: 200 }, result: null });
    });

    it("shows a job's log lines on its page, escaped, after their time and attempt, with how many were dropped, and in the JSON API", async () => {
      const { rows } = await sql.query(
        `INSERT INTO stampeded_jobs (queue, task, state, attempt, claimed_by, claimed_at, heartbeat_at)
         VALUES ('reports', 'render', 'executing', 2, uuidv7(), now(), now()), ('reports', 'render', 'available', 0, NULL, NULL, NULL)
         RETURNING id::text`,
      );
      const [logged, silent] = rows.map((r) => r.id as string);
      // Lines 1 to 3 were dropped: the job keeps its newest.
      await sql.query(
        `INSERT INTO stampeded_job_logs (job_id, seq, attempt, at, message)
         VALUES ($1, 4, 1, '2026-01-02T03:04:05.678Z', 'fetched <b>page</b> 4 & more'), ($1, 5, 2, '2026-01-02T03:04:06Z', 'retrying page 5')`,
        [logged],
      );
      const page = await (await get(`/stampeded/jobs/${logged}`)).text();
      expect(page).toContain(
        '<h2>Log</h2><p class="dim">3 older lines dropped: the task keeps the newest (its logs.maxLines).</p>' +
          '<pre class="log" tabindex="0"><span class="dim">2026-01-02T03:04:05.678Z #1</span> fetched &lt;b&gt;page&lt;/b&gt; 4 &amp; more\n' +
          '<span class="dim">2026-01-02T03:04:06.000Z #2</span> retrying page 5</pre>',
      );
      expect(await (await get(`/stampeded/jobs/${silent}`)).text()).toContain('<h2>Log</h2><p class="dim">no lines: its handler wrote none with ctx.log()</p>');
      expect((await (await get(`/stampeded/api/jobs/${logged}`)).json()).logs).toEqual({
        dropped: 3,
        lines: [
          { at: '2026-01-02T03:04:05.678Z', attempt: 1, message: 'fetched <b>page</b> 4 & more' },
          { at: '2026-01-02T03:04:06.000Z', attempt: 2, message: 'retrying page 5' },
        ],
      });
      expect((await (await get(`/stampeded/api/jobs/${silent}`)).json()).logs).toEqual({ dropped: 0, lines: [] });
      await sql.query(`DELETE FROM stampeded_job_logs WHERE job_id = $1`, [logged]);
      await sql.query(`DELETE FROM stampeded_jobs WHERE id = ANY($1::uuid[])`, [[logged, silent]]);
    });

    it('renders the jobs list with filters and a next-page link, and a job with its dead-letter provenance', async () => {
      const list = await (await get('/stampeded/jobs?queue=mail&tenant=globex')).text();
      expect(list).toContain('value="globex"');
      expect((list.match(/<tr><td[^>]*><a href="\/stampeded\/jobs\//g) ?? []).length).toBeGreaterThan(0);
      const { rows } = await sql.query(
        `INSERT INTO stampeded_jobs (queue, task, args, source_id, source_queue, source_attempts) VALUES ('audit-dead', 'audit', '{"who":"<script>alert(1)</script>"}', uuidv7(), 'audit', 4) RETURNING id`,
      );
      const detail = await (await get(`/stampeded/jobs/${rows[0].id}`)).text();
      expect(detail).toMatch(/in audit after 4 attempt\(s\)/);
      expect(detail).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
      expect(detail).not.toContain('<script>alert(1)');
      expect((await get('/stampeded/jobs/01a2372e-0000-7000-8000-000000000000')).status).toBe(404);
    });

    it("lists jobs by their ids' distinguishing tails, and shows an earlier attempt's error on a completed job as history", async () => {
      // Jobs made the same millisecond share their UUIDv7 time prefix; the list shows their tails.
      const { rows } = await sql.query<{ id: string; state: string }>(
        `INSERT INTO stampeded_jobs (queue, task, state, attempt, finished_at, last_error)
         VALUES ('lookalike', 'charge', 'completed', 2, now(), 'card declined <b>once</b>'),
                ('lookalike', 'charge', 'discarded', 3, now(), 'card declined for good'),
                ('lookalike', 'charge', 'available', 0, NULL, NULL)
         RETURNING id::text, state::text`,
      );
      const list = await (await get('/stampeded/jobs?queue=lookalike')).text();
      for (const { id } of rows) {
        expect(list).toContain(`<a href="/stampeded/jobs/${id}?queue=lookalike" title="${id}"><code>…${id.slice(-12)}</code></a>`);
      }
      expect(new Set(rows.map(({ id }) => id.slice(-12))).size).toBe(3);
      // Only the discarded job's error reads as a failure.
      expect(list).toContain('<span class="bad">card declined for good</span>');
      expect(list).toContain('<span class="dim" title="from an earlier attempt">card declined &lt;b&gt;once&lt;/b&gt;</span>');
      expect(list).not.toContain('<span class="bad">card declined &lt;b&gt;once');

      const completed = await (await get(`/stampeded/jobs/${rows.find((r) => r.state === 'completed')!.id}`)).text();
      expect(completed).toContain(
        '<h2>Last error <span class="dim">(an earlier attempt\'s; the job is completed now)</span></h2><pre tabindex="0">card declined &lt;b&gt;once&lt;/b&gt;</pre>',
      );
      expect(completed).not.toContain('<pre class="error" tabindex="0">');
      const discarded = await (await get(`/stampeded/jobs/${rows.find((r) => r.state === 'discarded')!.id}`)).text();
      expect(discarded).toContain('<h2>Last error</h2><pre class="error" tabindex="0">card declined for good</pre>');
    });

    it('shows args, meta, result and checkpoint pretty-printed and escaped, a large value folded', async () => {
      const html = '</pre><script>alert(document.cookie)</script><img src=x onerror=alert(1)>';
      const big = Array.from({ length: 60 }, (_, i) => ({ line: i, note: html }));
      const { rows } = await sql.query(
        `INSERT INTO stampeded_jobs (queue, task, state, attempt, finished_at, args, meta, result, checkpoint, checkpoint_seq, checkpoint_at)
         VALUES ('viewer', 'export', 'completed', 1, now(), $1, $2, $3, $4, 1, now()) RETURNING id::text`,
        [JSON.stringify({ html }), JSON.stringify({ trace: html }), JSON.stringify({ html }), JSON.stringify({ rows: big })],
      );
      const page = await (await get(`/stampeded/jobs/${rows[0].id}`)).text();
      expect(page).not.toContain('<script>alert');
      expect(page).not.toContain('<img src=x');
      expect(page).not.toMatch(/<\/pre><script/);
      const escaped = '&lt;/pre&gt;&lt;script&gt;alert(document.cookie)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;';
      expect(page).toContain(`<h2>Result</h2><pre tabindex="0">{\n  &quot;html&quot;: &quot;${escaped}&quot;\n}</pre>`);
      expect(page).toContain(`<h2>Args</h2><pre tabindex="0">{\n  &quot;html&quot;: &quot;${escaped}&quot;\n}</pre>`);
      expect(page).toContain(`<h2>Meta</h2><pre tabindex="0">{\n  &quot;trace&quot;: &quot;${escaped}&quot;\n}</pre>`);
      // The checkpoint runs to hundreds of lines: it starts folded, saying how large it is.
      expect(page).toMatch(
        /<details class="json"><summary>an object of 1 key, \d+ lines, [\d.]+ KiB: show<\/summary><pre tabindex="0">\{\n {2}&quot;rows&quot;: \[/,
      );
      expect(await (await get(`/stampeded/api/jobs/${rows[0].id}`)).json()).toMatchObject({ result: { html }, args: { html } });
    });

    it('lists a task no index serves a few jobs of the table at a time, each page saying how far it read', async () => {
      // Work's jobs come first in the list's order, mail's newsletters after them.
      const first = await (await get('/stampeded/jobs?task=newsletter&scan=3')).text();
      expect(first).toMatch(/<p>No jobs of task newsletter among the first 3 jobs\. <a rel="next" href="[^"]+">Search further →<\/a><\/p>/);
      expect(first).toContain('No index serves this filter: each page reads at most 3 jobs');
      expect(first).toContain('<input type="hidden" name="scan" value="3">');
      const seen: string[] = [];
      let html = first;
      let pages = 1;
      for (;;) {
        seen.push(...[...html.matchAll(/<tr><td[^>]*><a href="\/stampeded\/jobs\/([0-9a-f-]{36})\?/g)].map((m) => m[1]));
        const next = /<a rel="next" href="([^"]+)">/.exec(html)?.[1];
        if (!next) break;
        expect(next).toMatch(/scan=3/);
        html = await (await get(next.replaceAll('&amp;', '&'))).text();
        // A page short of matches says how far it read, unless it read to the end.
        if (html.includes('rel="next"'))
          expect(html).toMatch(/Showing \d+ match(es)? found in the next 3 jobs\.|No more jobs of task newsletter among the next 3 jobs\./);
        expect(++pages).toBeLessThan(50);
      }
      const { rows } = await sql.query(`SELECT id::text FROM stampeded_jobs WHERE task = 'newsletter' ORDER BY queue DESC, id DESC`);
      expect(seen).toEqual(rows.map((r) => r.id));
    });

    it('lists workflows, shows one as a graph and an indented tree, and cancels one whole from its page and the API', async () => {
      const flow = await queue.enqueueWorkflow({
        name: '<b>nightly</b>',
        jobs: [
          { name: 'orders', task: 'fetch', args: {}, options: { queue: 'reports' } },
          { name: 'refunds', task: 'fetch', args: {}, options: { queue: 'reports' } },
          { name: 'report', task: 'build', args: {}, options: { queue: 'reports' }, dependsOn: ['orders', 'refunds'] },
          { name: 'notify', task: 'notify', args: {}, options: { queue: 'reports' }, dependsOn: [{ name: 'report', ignoreFailure: true }] },
        ],
      });
      expect(await (await get('/stampeded/api/workflows?name=%3Cb%3Enightly%3C%2Fb%3E')).json()).toEqual([
        expect.objectContaining({ id: flow.id, kind: 'workflow', jobs: 4, state: 'running', counts: { available: 2, pending: 2 } }),
      ]);
      const list = await (await get('/stampeded/workflows')).text();
      expect(list).toContain(`<a href="/stampeded/workflows/${flow.id}">&lt;b&gt;nightly&lt;/b&gt;</a>`);
      expect(list).not.toContain('<b>nightly</b>');
      expect(list).toMatch(/<td[^>]*>pending 2, available 2<\/td>/);

      // The tree: notify at the top, then what each job waits for, one level deeper each.
      const page = await (await get(`/stampeded/workflows/${flow.id}?view=tree`)).text();
      const tree = [...page.matchAll(/<span class="tree">((?:&nbsp;)*)(?:&#8627; )?(\w+)<\/span>/g)].map((m) => `${m[1].length / 6 / 4}:${m[2]}`);
      expect(tree).toEqual(['0:notify', '1:report', '2:orders', '2:refunds']);
      expect(page).toMatch(/report<\/span> <span class="dim">\(runs even if this fails\)<\/span>/);
      expect(page).toContain(`/stampeded/actions/workflows/${flow.id}/cancel`);
      expect(page).toContain(' · pending 2, available 2 ');

      // The graph, the page's default, holds the names escaped and offers the same cancel.
      const graph = await (await get(`/stampeded/workflows/${flow.id}`)).text();
      expect(graph).toContain('<g class="node" data-name="report" data-state="pending">');
      expect(graph).toContain(`/stampeded/actions/workflows/${flow.id}/cancel`);
      expect(graph).not.toContain('<b>nightly</b>');

      const cancelled = await post(`/stampeded/actions/workflows/${flow.id}/cancel`, { _back: `/stampeded/workflows/${flow.id}` });
      expect(cancelled.status).toBe(303);
      expect(cancelled.headers.get('location')).toBe(`/stampeded/workflows/${flow.id}`);
      const { rows } = await sql.query(`SELECT state, last_error FROM stampeded_jobs WHERE id = ANY($1::uuid[])`, [Object.values(flow.jobs)]);
      expect(rows).toEqual(Array(4).fill({ state: 'cancelled', last_error: 'workflow cancelled: by ops (dashboard)' }));
      // Finished: no cancel button any more, and the API's cancel finds nothing left to end.
      expect(await (await get(`/stampeded/workflows/${flow.id}`)).text()).not.toContain('/cancel"');
      expect(await (await post(`/stampeded/api/workflows/${flow.id}/cancel`, { reason: 'again' })).json()).toEqual({ id: flow.id, cancelled: 0 });
      expect(await (await get(`/stampeded/api/workflows/${flow.id}`)).json()).toMatchObject({ id: flow.id, state: 'finished', counts: { cancelled: 4 } });
      expect((await get('/stampeded/api/workflows/01a2372e-0000-7000-8000-000000000000')).status).toBe(404);
      expect((await get('/stampeded/api/workflows/nightly')).status).toBe(400);
      expect((await post('/stampeded/api/workflows/01a2372e-0000-7000-8000-000000000000/cancel')).status).toBe(404);
    });

    it('renders errors, workers and health', async () => {
      await queue.enqueue('sync-order', { order: 99 }, { queue: 'work', maxAttempts: 1 });
      for (const [path, expected] of [
        ['/stampeded/errors', /no failing jobs|upstream 503/],
        ['/stampeded/workers', new RegExp(`<td[^>]*>${process.pid}</td>`)],
        ['/stampeded/health', /PostgreSQL 1[4-9]\.\d+/],
      ] as const) {
        const response = await get(path);
        expect(response.status).toBe(200);
        expect(await response.text()).toMatch(expected);
      }
    });
  });
});
