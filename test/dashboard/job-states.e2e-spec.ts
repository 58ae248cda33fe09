import { Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { JOB_STATES, QueueService, StampededModule, type JobState } from '@stampeded/nestjs';
import { StampededDashboardModule } from '@stampeded/dashboard';
import { expectEnqueued, type TestDatabase } from '@stampeded/testing';
import { testDatabase } from '../support/test-app.js';
import { cli } from '../support/cli.js';

/**
 * The core owns the list of job states; the dashboard and the CLI show it.
 * Each surface is read as a user reads it and compared with the core's list,
 * so a state the core gains and a surface does not show fails here.
 */
describe('job states on every surface', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let base: string;
  /** Jobs waiting in 'pending': one behind its key's head, one waiting on a workflow dependency. */
  let pending: string[];

  beforeAll(async () => {
    db = await testDatabase();
    @Module({
      imports: [
        StampededModule.forRoot({ connection: { url: db.url }, migrations: 'auto', worker: { enabled: false } }),
        StampededDashboardModule.forRoot({ path: '/stampeded', auth: () => true, refreshSeconds: 0 }),
      ],
    })
    class StatesTestModule {}
    app = await NestFactory.create(StatesTestModule, { logger: ['error', 'warn'] });
    await app.listen(0, '127.0.0.1');
    base = (await app.getUrl()).replace('[::1]', '127.0.0.1');

    const queue = app.get(QueueService);
    await queue.enqueue('apply-entry', { entry: 1 }, { queue: 'ledger', orderingKey: 'account:7' });
    const behind = await queue.enqueue('apply-entry', { entry: 2 }, { queue: 'ledger', orderingKey: 'account:7' });
    const flow = await queue.enqueueWorkflow({
      name: 'nightly',
      jobs: [
        { name: 'fetch', task: 'fetch', args: {}, options: { queue: 'ledger' } },
        { name: 'report', task: 'build', args: {}, options: { queue: 'ledger' }, dependsOn: ['fetch'] },
      ],
    });
    pending = [behind.id, flow.jobs.report].sort();
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const get = async (path: string) => fetch(`${base}/stampeded${path}`);
  const headers = (html: string) => [...(html.match(/<thead>(.*?)<\/thead>/)?.[1] ?? '').matchAll(/<th[^>]*>(.*?)<\/th>/g)].map((m) => m[1]);

  it("show the core's list of states, in its order", async () => {
    const { queues } = (await (await get('/api/queues')).json()) as { queues: { queue: string; counts: Record<string, number> }[] };
    expect(queues.map((q) => Object.keys(q.counts))).toEqual([[...JOB_STATES]]);

    const queuesPage = await (await get('')).text();
    const columns = headers(queuesPage);
    expect(columns.slice(columns.indexOf('Queue') + 1, columns.indexOf('head wait'))).toEqual([...JOB_STATES]);

    const jobsPage = await (await get('/jobs')).text();
    const options = [...(jobsPage.match(/<select name="state">(.*?)<\/select>/)?.[1] ?? '').matchAll(/<option[^>]*>(.*?)<\/option>/g)].map((m) => m[1]);
    expect(options).toEqual(['any state', ...JOB_STATES]);

    const status = await cli(db.url, ['status']);
    expect(status.code).toBe(0);
    const header = status.stdout.split('\n').find((l) => l.startsWith('QUEUE'))!;
    expect(header.split(/\s+/).slice(1, 1 + JOB_STATES.length)).toEqual(JOB_STATES.map((s) => s.toUpperCase()));
    expect(Object.keys((await cli(db.url, ['status', '--json'])).json().queues[0].counts)).toEqual([...JOB_STATES]);

    const help = await cli(db.url, ['jobs', 'list', '--help']);
    expect(help.stdout.replace(/\s+/g, ' ')).toContain(`only this state: ${JOB_STATES.join(', ')}`);

    // A state no surface knows is refused with the core's list.
    const refusal = `state must be one of ${JOB_STATES.join(', ')}; got "sleeping".`;
    const api = await get('/api/jobs?state=sleeping');
    expect(api.status).toBe(400);
    expect(((await api.json()) as { message: string }).message).toBe(refusal);
    const refused = await cli(db.url, ['jobs', 'list', '--state', 'sleeping']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe(`stampeded: ${refusal}\n`);
  });

  it('count and list the jobs waiting in pending', async () => {
    const { queues } = (await (await get('/api/queues')).json()) as { queues: { queue: string; counts: Record<string, number> }[] };
    expect(queues).toEqual([expect.objectContaining({ queue: 'ledger', counts: expect.objectContaining({ pending: 2, available: 2 }) })]);
    const queuesPage = await (await get('')).text();
    expect(queuesPage).toContain(`<a href="/stampeded/jobs?queue=ledger&amp;state=pending">2</a>`);

    const page = (await (await get('/api/jobs?state=pending')).json()) as { jobs: { id: string; state: string }[] };
    expect(page.jobs.map((j) => j.id).sort()).toEqual(pending);
    expect(page.jobs.every((j) => j.state === 'pending')).toBe(true);
    const inQueue = (await (await get('/api/jobs?queue=ledger&state=pending')).json()) as { jobs: { id: string }[] };
    expect(inQueue.jobs.map((j) => j.id).sort()).toEqual(pending);

    const listed = await (await get('/jobs?queue=ledger&state=pending')).text();
    expect(listed).toContain('<option selected>pending</option>');
    for (const id of pending) expect(listed).toContain(`title="${id}"`);
    expect(listed.match(/<td[^>]*>pending<\/td>/g)).toHaveLength(2);

    const run = await cli(db.url, ['jobs', 'list', '--state', 'pending', '--json']);
    expect(run.code).toBe(0);
    expect(
      run
        .json()
        .jobs.map((j: { id: string }) => j.id)
        .sort(),
    ).toEqual(pending);
    const status = await cli(db.url, ['status', '--json']);
    expect(status.json().queues[0].counts).toMatchObject({ pending: 2, available: 2 });
  });

  it("list every state when the jobs page's filter form says any state", async () => {
    // The form sends every field, the state select's "any state" as an empty value.
    const response = await get('/jobs?queue=ledger&state=&task=&tenant=&destination=');
    expect(response.status).toBe(200);
    const listed = await response.text();
    expect(listed).toContain('<option value="">any state</option>');
    expect(listed.match(/<td[^>]*>(available|pending)<\/td>/g)).toHaveLength(4);
    const api = await get('/api/jobs?queue=ledger&state=');
    expect(api.status).toBe(200);
    expect(((await api.json()) as { jobs: unknown[] }).jobs).toHaveLength(4);
  });

  it("count pending jobs as enqueued in @stampeded/testing's expectEnqueued(), and refuse a state the core does not have", async () => {
    const found = await expectEnqueued(app, { queue: 'ledger', count: 4 });
    expect(found.filter((j) => j.state === 'pending').map((j) => j.id)).toEqual(pending);
    expect((await expectEnqueued(app, { queue: 'ledger', states: ['pending'] })).map((j) => j.id)).toEqual(pending);
    await expect(expectEnqueued(app, { queue: 'ledger', states: ['waiting' as JobState] })).rejects.toThrow(
      `expectEnqueued(): states must be some of ${JOB_STATES.join(', ')}; got "waiting".`,
    );
  });

  it('cancel pending jobs, one from its page and every match of a filter, as the core allows', async () => {
    const page = await (await get(`/jobs/${pending[0]}?queue=ledger`)).text();
    expect(page).toContain(`action="/stampeded/actions/jobs/${pending[0]}/cancel?queue=ledger"`);
    expect(page).not.toContain(`/actions/jobs/${pending[0]}/discard`);

    const csrf = await get('/api/csrf');
    const cookie = csrf.headers.getSetCookie()[0].split(';')[0];
    const { token } = (await csrf.json()) as { token: string };
    const bulk = (body: Record<string, unknown>) =>
      fetch(`${base}/stampeded/api/bulk/cancel`, {
        method: 'POST',
        headers: { cookie, 'x-stampeded-csrf': token, 'content-type': 'application/json' },
        body: JSON.stringify({ queue: 'ledger', state: 'pending', ...body }),
      }).then((r) => r.json());
    expect(await bulk({ dryRun: true })).toMatchObject({ matched: 2, changed: 0 });
    expect(await bulk({})).toMatchObject({ changed: 2, truncated: false });
    const run = await cli(db.url, ['jobs', 'list', '--state', 'cancelled', '--json']);
    expect(
      run
        .json()
        .jobs.map((j: { id: string }) => j.id)
        .sort(),
    ).toEqual(pending);
  });
});
