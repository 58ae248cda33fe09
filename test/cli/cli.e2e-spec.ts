import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { QueueService, Task, UnrecoverableError, type TaskHandler } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';
import { cli, spawnCli } from '../support/cli.js';
import { startPostgresMajor } from '../support/postgres-major.mjs';
import { buildProgram } from '../../apps/cli/src/cli.program.js';

@Task('charge', { queue: 'billing', deadLetterQueue: 'billing-dead' })
class Charge implements TaskHandler<{ card: string }> {
  async handle(args: { card: string }) {
    throw new UnrecoverableError(`card ${args.card} declined`);
  }
}

@Task('refund', { queue: 'billing', deadLetterQueue: 'billing-dead' })
class Refund implements TaskHandler {
  async handle() {
    throw new UnrecoverableError('gateway timeout');
  }
}

async function sqlOn(url: string, text: string) {
  const client = await sqlClient(url);
  try {
    return await client.query(text);
  } finally {
    await client.end();
  }
}

describe('stampeded CLI', () => {
  let db: TestDatabase;
  let url: string;
  let sql: pg.Client;

  beforeAll(async () => {
    db = await testDatabase();
    url = db.url;
    sql = await sqlClient(url);
  });

  afterAll(async () => {
    await sql?.end();
    await db?.drop();
  });

  it('refuses with one line and exit code 3 before Stampeded is installed, and migrate installs it', async () => {
    const before = await spawnCli(url, ['status']);
    expect(before.code).toBe(3);
    expect(before.stderr.trim().split('\n')).toEqual([expect.stringMatching(/not installed in schema "public".*stampeded migrate/)]);

    const migrated = await spawnCli(url, ['migrate']);
    expect(migrated.code).toBe(0);
    expect(migrated.stdout).toMatch(/schema "public" migrated to version \d+/);
    // Progress, one line per migration, on stderr.
    expect(migrated.stderr).toMatch(/applied migration 1 \(seed\)/);

    const again = await spawnCli(url, ['migrate', '--json']);
    expect(again.code).toBe(0);
    expect(again.json()).toMatchObject({ schema: 'public', applied: [] });
  });

  it('installs into another schema with --schema', async () => {
    expect((await cli(url, ['migrate', '--schema', 'ops'])).code).toBe(0);
    const status = await cli(url, ['status', '--schema', 'ops', '--json']);
    expect(status.code).toBe(0);
    expect(status.json()).toMatchObject({ schema: 'ops', queues: [] });
    expect((await cli(url, ['status', '--schema', 'nowhere'])).code).toBe(3);
  });

  it('says in one line what is wrong with the connection, with exit codes a script can trust', async () => {
    const noDb = new URL(url);
    noDb.pathname = '/no_such_database';
    const badLogin = new URL(url);
    badLogin.password = 'wrong';
    badLogin.username = 'nobody';
    const [refused, missing, denied, notUrl, none, badLimit, badState, badInterval] = await Promise.all([
      spawnCli('postgres://u:secret@127.0.0.1:1/db', ['status']),
      spawnCli(noDb.toString(), ['status']),
      spawnCli(badLogin.toString(), ['status']),
      spawnCli('not a url', ['status']),
      spawnCli(undefined, ['status']),
      spawnCli(url, ['jobs', 'list', '--limit', 'lots']),
      spawnCli(url, ['jobs', 'list', '--state', 'sleeping']),
      spawnCli(url, ['prune', '--failed-older-than', 'banana']),
    ]);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toMatch(/^stampeded: Cannot connect to PostgreSQL at 127\.0\.0\.1:1: connection refused\..*\n$/);
    expect(refused.stderr).not.toContain('secret');
    expect(missing.code).toBe(3);
    expect(missing.stderr).toMatch(/has no database named "no_such_database"/);
    expect(denied.code).toBe(3);
    expect(denied.stderr).toMatch(/refused the login|Cannot connect/);
    expect(notUrl.code).toBe(2);
    expect(notUrl.stderr).toMatch(/is not a PostgreSQL connection URL/);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/set DATABASE_URL or pass --url/);
    expect(badLimit.code).toBe(2);
    expect(badState.code).toBe(2);
    expect(badState.stderr).toMatch(/state must be one of/);
    expect(badInterval.code).toBe(2);
    expect(badInterval.stderr).toMatch(/invalid input syntax for type interval: "banana"/);
  });

  it('runs on PostgreSQL 17: migrate, status and jobs list, as on 18', async () => {
    const pg17 = await startPostgresMajor(17, { durable: false });
    try {
      const migrated = await cli(pg17.url, ['migrate', '--json']);
      expect(migrated.code).toBe(0);
      expect(migrated.json()).toMatchObject({ schema: 'public', applied: expect.arrayContaining([{ version: 1, name: 'seed' }]) });
      await sqlOn(pg17.url, `INSERT INTO stampeded_jobs (queue, task) VALUES ('mail', 'send'), ('mail', 'send')`);
      const status = await cli(pg17.url, ['status', '--json']);
      expect(status.code).toBe(0);
      expect(status.json()).toMatchObject({ schema: 'public', queues: [expect.objectContaining({ queue: 'mail' })] });
      const list = await cli(pg17.url, ['jobs', 'list', '--json']);
      expect(list.code).toBe(0);
      const ids = (list.json() as { jobs: { id: string }[] }).jobs.map((j) => j.id);
      expect(ids).toHaveLength(2);
      // Drawn by the install's uuidv7(): version 7, in insertion order.
      for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab]/);
      const { rows } = await sqlOn(pg17.url, `SELECT count(*)::int AS n FROM stampeded_queue_counts WHERE queue = 'mail' AND state = 'available' AND n > 0`);
      expect(rows[0].n).toBeGreaterThan(0);
    } finally {
      await pg17.stop();
    }
  });

  it('has --help for every command', async () => {
    // The binary once, for its exit code; every command's help in-process,
    // where it costs nothing (a spawn is a second on a busy CI machine).
    const root = await spawnCli(url, ['--help']);
    expect(root.code).toBe(0);
    expect(root.stdout).toMatch(/^Usage: stampeded/);
    expect((await cli(url, ['dlq', 'redrive', '--help'])).code).toBe(0);
    const program = buildProgram({ stdout: { write: () => true }, stderr: { write: () => true }, env: {} });
    const paths = [
      ['migrate'],
      ['status'],
      ['jobs', 'list'],
      ['jobs', 'show'],
      ['jobs', 'retry'],
      ['jobs', 'cancel'],
      ['jobs', 'discard'],
      ['schedules', 'list'],
      ['schedules', 'pause'],
      ['schedules', 'resume'],
      ['schedules', 'trigger'],
      ['queues', 'pause'],
      ['queues', 'resume'],
      ['queues', 'policy'],
      ['breakers', 'list'],
      ['breakers', 'reset'],
      ['health'],
      ['prune'],
      ['dlq', 'redrive'],
      ['workflows', 'list'],
      ['workflows', 'show'],
      ['workflows', 'cancel'],
    ];
    for (const path of paths) {
      let command = program;
      for (const name of path) command = command.commands.find((c) => c.name() === name)!;
      expect(command).toBeDefined();
      expect(command.helpInformation()).toMatch(new RegExp(`^Usage: stampeded ${path.join(' ')}`));
      expect(command.description()).not.toBe('');
    }
  });

  describe('on a running install', () => {
    let app: INestApplicationContext;
    let pending: string[];

    beforeAll(async () => {
      app = await bootApp(url, { providers: [Charge, Refund], stampeded: { worker: { queues: ['billing'] } } });
      const queue = app.get(QueueService);
      await queue.enqueueMany([
        { task: 'charge', args: { card: '4242' } },
        { task: 'charge', args: { card: '1111' } },
        { task: 'refund', args: {} },
      ]);
      // Three real terminal failures, each leaving its provenance copy in billing-dead.
      await waitFor(async () => (await sql.query(`SELECT 1 FROM stampeded_jobs WHERE queue = 'billing-dead'`)).rowCount === 3, 'three dead letters');
      await app.close();
      // Jobs no worker takes: the CLI acts on them without a race.
      const setup = await bootApp(url, { stampeded: { worker: { enabled: false } } });
      const enqueued = await setup
        .get(QueueService)
        .enqueueMany(Array.from({ length: 7 }, (_, i) => ({ task: 'send', args: { i }, options: { queue: 'mail', tenantId: i % 2 ? 'acme' : 'globex' } })));
      pending = enqueued.map((r) => r.id);
      await setup.close();
    });

    it('status shows jobs per queue and state from the counters', async () => {
      const human = await cli(url, ['status']);
      expect(human.code).toBe(0);
      expect(human.stdout).toMatch(/^mail\s+0\s+7\s+0\s+0\s+0\s+0\s+0\s+0\s+steady/m);
      const json = (await cli(url, ['status', '--json'])).json();
      const billing = json.queues.find((q: any) => q.queue === 'billing');
      expect(billing.counts).toMatchObject({ discarded: 3, available: 0 });
      expect(json.queues.find((q: any) => q.queue === 'billing-dead').counts.available).toBe(3);
    });

    it('lists jobs with filters, a page at a time, each job exactly once', async () => {
      const seen: string[] = [];
      let after: string | null = null;
      let pages = 0;
      do {
        const run = await cli(url, ['jobs', 'list', '--queue', 'mail', '--limit', '3', '--json', ...(after ? ['--after', after] : [])]);
        expect(run.code).toBe(0);
        const page = run.json();
        seen.push(...page.jobs.map((j: any) => j.id));
        after = page.next;
        pages++;
      } while (after);
      expect(pages).toBe(3);
      expect(seen.sort()).toEqual([...pending].sort());

      const acme = (await cli(url, ['jobs', 'list', '--tenant', 'acme', '--json'])).json();
      expect(acme.jobs).toHaveLength(3);
      const failed = (await cli(url, ['jobs', 'list', '--queue', 'billing', '--state', 'discarded', '--task', 'charge', '--json'])).json();
      expect(failed.jobs).toHaveLength(2);
      const human = await cli(url, ['jobs', 'list', '--queue', 'mail', '--limit', '2']);
      expect(human.stdout).toMatch(/^ID\s+QUEUE\s+TASK\s+STATE/);
      expect(human.stdout).toMatch(/next page: --after \S+/);
    });

    it('finds jobs by the args they contain, the tail of an id, and an error fingerprint', async () => {
      const byArgs = (await cli(url, ['jobs', 'list', '--args', '{"card": "4242"}', '--json'])).json();
      // The job, and its dead letter with the same args.
      expect(byArgs.jobs.map((j: any) => `${j.queue} ${j.state}`).sort()).toEqual(['billing discarded', 'billing-dead available']);
      const byTail = (await cli(url, ['jobs', 'list', '--queue', 'mail', '--id', pending[3].slice(-8), '--json'])).json();
      expect(byTail.jobs.map((j: any) => j.id)).toEqual([pending[3]]);
      const { rows } = await sql.query(`SELECT encode(error_fingerprint, 'hex') AS fp FROM stampeded_jobs WHERE queue = 'billing' AND task = 'refund'`);
      const byFingerprint = (await cli(url, ['jobs', 'list', '--fingerprint', rows[0].fp.slice(0, 12), '--json'])).json();
      expect(byFingerprint.jobs.map((j: any) => j.task)).toEqual(['refund']);
      const bad = await cli(url, ['jobs', 'list', '--args', '42']);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('args must be a JSON object');
    });

    it('lists a task no index serves a bounded scan at a time, resuming where each scan stopped', async () => {
      // Mail's seven sends come first in the list's order, billing's refund after them.
      const human = await cli(url, ['jobs', 'list', '--task', 'refund', '--scan', '3']);
      expect(human.code).toBe(0);
      expect(human.stdout).toMatch(/^no jobs of task refund among the first 3 jobs; search further: --after \S+$/m);
      const seen: string[] = [];
      let after: string | null = null;
      let pages = 0;
      do {
        const page: any = (
          await cli(url, ['jobs', 'list', '--task', 'refund', '--scan', '3', '--limit', '1', '--json', ...(after ? ['--after', after] : [])])
        ).json();
        expect(page.scan.budget).toBe(3);
        seen.push(...page.jobs.map((j: any) => j.id));
        after = page.next;
      } while (after && ++pages < 20);
      const { rows } = await sql.query(`SELECT id::text FROM stampeded_jobs WHERE task = 'refund' ORDER BY queue DESC, id DESC`);
      expect(seen).toEqual(rows.map((r) => r.id));
      for (const scan of ['lots', '0', '100001']) {
        const bad = await cli(url, ['jobs', 'list', '--task', 'refund', '--scan', scan]);
        expect(bad.code).toBe(2);
        expect(bad.stderr).toMatch(/scan is how many jobs .* from 1 to 100,000/);
      }
    });

    it("shows a job's progress and its result", async () => {
      const { rows } = await sql.query(
        `INSERT INTO stampeded_jobs (queue, task, state, attempt, finished_at, progress, result)
         VALUES ('mail', 'send', 'completed', 1, now(), '{"done": 3, "total": 3}', '{"messageId": "<a1@mail>", "accepted": ["x@y.z"]}') RETURNING id::text`,
      );
      const shown = await cli(url, ['jobs', 'show', rows[0].id]);
      expect(shown.code).toBe(0);
      expect(shown.stdout).toMatch(/^progress:\s+\{"done":3,"total":3\}$/m);
      expect(shown.stdout).toMatch(/^result:\s+\{"accepted":\["x@y\.z"\],"messageId":"<a1@mail>"\}$/m);
      expect((await cli(url, ['jobs', 'show', rows[0].id, '--json'])).json()).toMatchObject({
        progress: { done: 3, total: 3 },
        result: { messageId: '<a1@mail>', accepted: ['x@y.z'] },
      });
      await sql.query(`DELETE FROM stampeded_jobs WHERE id = $1`, [rows[0].id]);
    });

    it("shows a job's log lines, each after its attempt and time, with how many were dropped", async () => {
      const { rows } = await sql.query(
        `INSERT INTO stampeded_jobs (queue, task, state, attempt, finished_at) VALUES ('mail', 'send', 'completed', 2, now()) RETURNING id::text`,
      );
      const id = rows[0].id as string;
      await sql.query(
        `INSERT INTO stampeded_job_logs (job_id, seq, attempt, at, message)
         VALUES ($1, 2, 1, '2026-01-02T03:04:05.678Z', 'connecting to smtp'), ($1, 3, 2, '2026-01-02T03:04:07Z', E'sent\nid <a1@mail>')`,
        [id],
      );
      const shown = await cli(url, ['jobs', 'show', id]);
      expect(shown.code).toBe(0);
      expect(shown.stdout).toContain(
        'log:        \n  (1 older line dropped)\n  #1 2026-01-02T03:04:05.678Z connecting to smtp\n  #2 2026-01-02T03:04:07.000Z sent\n    id <a1@mail>\n',
      );
      expect((await cli(url, ['jobs', 'show', id, '--json'])).json().logs).toEqual({
        dropped: 1,
        lines: [
          { at: '2026-01-02T03:04:05.678Z', attempt: 1, message: 'connecting to smtp' },
          { at: '2026-01-02T03:04:07.000Z', attempt: 2, message: 'sent\nid <a1@mail>' },
        ],
      });
      await sql.query(`DELETE FROM stampeded_job_logs WHERE job_id = $1`, [id]);
      await sql.query(`DELETE FROM stampeded_jobs WHERE id = $1`, [id]);
    });

    it('shows, retries, cancels and discards one job, exiting 1 when the job is missing or unchanged', async () => {
      const [id] = pending;
      const shown = await cli(url, ['jobs', 'show', id, '--json']);
      expect(shown.code).toBe(0);
      expect(shown.json()).toMatchObject({ id, queue: 'mail', task: 'send', state: 'available' });
      const text = (await cli(url, ['jobs', 'show', id])).stdout;
      expect(text).toMatch(/args:\s+\{"i":\d\}/);
      expect(text).toMatch(/^progress:\s+-$/m);
      expect(text).toMatch(/^result:\s+-$/m);
      expect(text).toMatch(/^log:\s+-$/m);

      const cancelled = await cli(url, ['jobs', 'cancel', id]);
      expect(cancelled.code).toBe(0);
      expect(cancelled.stdout).toMatch(/available -> cancelled/);
      const twice = await cli(url, ['jobs', 'cancel', id]);
      expect(twice.code).toBe(1);
      expect(twice.stderr).toMatch(/is cancelled: cancel did nothing/);

      const retried = await cli(url, ['jobs', 'retry', id, '--json']);
      expect(retried.code).toBe(0);
      expect(retried.json()).toMatchObject({ previousState: 'cancelled', state: 'available' });

      const discarded = await cli(url, ['jobs', 'discard', pending[1]]);
      expect(discarded.code).toBe(0);
      const { rows } = await sql.query(`SELECT state, last_error FROM stampeded_jobs WHERE id = $1`, [pending[1]]);
      expect(rows[0]).toMatchObject({ state: 'discarded', last_error: expect.stringMatching(/discarded by .*stampeded CLI/) });

      const unknown = await cli(url, ['jobs', 'show', '01a2372e-0000-7000-8000-000000000000']);
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toMatch(/No job with id/);
      expect((await cli(url, ['jobs', 'retry', 'not-a-uuid'])).code).toBe(2);
    });

    it('lists workflows, shows one as a tree, and cancels one whole', async () => {
      const setup = await bootApp(url, { stampeded: { worker: { enabled: false } } });
      let flow: { id: string; jobs: Record<string, string> };
      try {
        flow = await setup.get(QueueService).enqueueWorkflow({
          name: 'nightly',
          jobs: [
            { name: 'orders', task: 'fetch', args: {}, options: { queue: 'reports' } },
            { name: 'refunds', task: 'fetch', args: {}, options: { queue: 'reports' } },
            { name: 'report', task: 'build', args: {}, options: { queue: 'reports' }, dependsOn: ['orders', 'refunds'] },
            { name: 'notify', task: 'notify', args: {}, options: { queue: 'reports' }, dependsOn: [{ name: 'report', ignoreFailure: true }] },
          ],
        });
      } finally {
        await setup.close();
      }

      const listed = await cli(url, ['workflows', 'list', '--json']);
      expect(listed.code).toBe(0);
      expect(listed.json()).toEqual([
        expect.objectContaining({ id: flow.id, name: 'nightly', kind: 'workflow', jobs: 4, state: 'running', counts: { available: 2, pending: 2 } }),
      ]);
      expect((await cli(url, ['workflows', 'list'])).stdout).toMatch(
        new RegExp(`^${flow.id}\\s+nightly\\s+workflow\\s+4\\s+running\\s+pending 2, available 2\\s`, 'm'),
      );
      expect((await cli(url, ['workflows', 'list', '--name', 'other'])).stdout.trim()).toBe('no workflows');

      // The tree: notify at the top, what it waits for beneath it, indented by level.
      const shown = await cli(url, ['workflows', 'show', flow.id]);
      expect(shown.code).toBe(0);
      expect(shown.stdout).toMatch(/^jobs:\s+pending 2, available 2$/m);
      const tree = shown.stdout.split('\n').filter((l) => /^\s*(orders|refunds|report|notify) {2}/.test(l));
      expect(tree.map((l) => l.replace(/ {2}\S+ {2}\S+ {2}[0-9a-f-]{36}.*$/, ''))).toEqual(['notify', '  report', '    orders', '    refunds']);
      expect(tree[1]).toMatch(/^ {2}report {2}pending {2}build {2}[0-9a-f-]{36} {2}\(runs even if this fails\)$/);
      expect((await cli(url, ['workflows', 'show', flow.id, '--json'])).json()).toMatchObject({ id: flow.id, jobs: expect.any(Array) });

      const cancelled = await cli(url, ['workflows', 'cancel', flow.id, '--reason', 'rerun tomorrow']);
      expect(cancelled.code).toBe(0);
      expect(cancelled.stdout).toMatch(/4 job\(s\) cancelled/);
      const { rows } = await sql.query(`SELECT state, last_error FROM stampeded_jobs WHERE id = ANY($1::uuid[])`, [Object.values(flow.jobs)]);
      expect(rows).toHaveLength(4);
      for (const row of rows)
        expect(row).toEqual({ state: 'cancelled', last_error: expect.stringMatching(/^workflow cancelled: rerun tomorrow, by .*\(stampeded CLI\)$/) });
      expect((await cli(url, ['workflows', 'cancel', flow.id, '--json'])).json()).toEqual({ id: flow.id, cancelled: 0 });

      const unknown = await cli(url, ['workflows', 'show', '01a2372e-0000-7000-8000-000000000000']);
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toMatch(/No workflow with id .*stampeded workflows list/);
      const bad = await cli(url, ['workflows', 'cancel', 'nightly']);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/"nightly" is not a workflow id/);
    });

    it('pauses and resumes a queue, saying who paused it and why', async () => {
      const paused = await cli(url, ['queues', 'pause', 'mail', '--reason', 'deploying']);
      expect(paused.code).toBe(0);
      expect(paused.stdout).toMatch(/^queue mail paused by .+: deploying$/m);
      let { rows } = await sql.query(`SELECT paused, paused_by, pause_reason, paused_at, verdict, reason FROM stampeded_queue_policies WHERE queue = 'mail'`);
      // The pause is its columns; the verdict is left to the planner.
      expect(rows[0]).toMatchObject({ paused: true, paused_by: expect.any(String), pause_reason: 'deploying', reason: null });
      expect(rows[0].paused_at).toBeInstanceOf(Date);
      const status = await cli(url, ['status']);
      expect(status.stdout).toMatch(/\sVERDICT\s+PAUSED BY\s/);
      const line = status.stdout.split('\n').find((l) => l.startsWith('mail '))!;
      expect(line).toContain(` ${rows[0].paused_by} `);
      expect((await cli(url, ['status', '--json'])).json().queues.find((q: any) => q.queue === 'mail')).toMatchObject({
        paused: true,
        pausedBy: rows[0].paused_by,
        pauseReason: 'deploying',
      });
      expect((await cli(url, ['queues', 'resume', 'mail'])).code).toBe(0);
      ({ rows } = await sql.query(`SELECT paused, paused_by, pause_reason, paused_at, verdict FROM stampeded_queue_policies WHERE queue = 'mail'`));
      expect(rows[0]).toEqual({ paused: false, paused_by: null, pause_reason: null, paused_at: null, verdict: 'steady' });
    });

    it("sets a queue's policy with the core's validation, and resets a breaker, recording who did", async () => {
      const row = async () => (await sql.query(`SELECT max_running, max_wait_secs, policy_by FROM stampeded_queue_policies WHERE queue = 'reports'`)).rows[0];
      const set = await cli(url, ['queues', 'policy', 'reports', '--max-running', '3', '--json']);
      expect(set.code).toBe(0);
      expect(set.json()).toMatchObject({ queue: 'reports', maxRunning: 3, maxWaitSecs: null, policyBy: expect.stringMatching(/ \(stampeded CLI\)$/) });
      // A flag not given keeps its value; none removes a limit.
      expect((await cli(url, ['queues', 'policy', 'reports', '--max-wait-secs', '20'])).stdout).toMatch(/^max running:\s+3$/m);
      expect(await row()).toEqual({ max_running: 3, max_wait_secs: 20, policy_by: expect.stringMatching(/ \(stampeded CLI\)$/) });
      const bad = await cli(url, ['queues', 'policy', 'reports', '--max-running', 'zero']);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/policy\.maxRunning must be a whole number from 1 to 2147483647 .*got "zero"\. Nothing was written/);
      expect((await cli(url, ['queues', 'policy', 'reports'])).code).toBe(2);
      expect(await row()).toMatchObject({ max_running: 3, max_wait_secs: 20 });
      expect((await cli(url, ['queues', 'policy', 'reports', '--max-running', 'none'])).code).toBe(0);
      expect(await row()).toMatchObject({ max_running: null, max_wait_secs: 20 });

      await sql.query(`SELECT stampeded_breaker_trip('ledger-api', 3600000, 'on-call', 'ledger down')`);
      const list = await cli(url, ['breakers', 'list']);
      expect(list.stdout.split('\n').find((l) => l.startsWith('ledger-api '))).toMatch(/^ledger-api\s+open\s+0\s+\S+\s+on-call\s+ledger down\s+-$/);
      const reset = await cli(url, ['breakers', 'reset', 'ledger-api']);
      expect(reset.code).toBe(0);
      expect(reset.stdout).toMatch(/^breaker for ledger-api closed by .+ \(stampeded CLI\)$/m);
      expect((await sql.query(`SELECT state, closed_by FROM stampeded_breakers WHERE destination = 'ledger-api'`)).rows[0]).toEqual({
        state: 'closed',
        closed_by: expect.stringMatching(/ \(stampeded CLI\)$/),
      });
      const none = await cli(url, ['breakers', 'reset', 'nowhere']);
      expect(none.code).toBe(1);
      expect(none.stderr).toMatch(/No circuit breaker for destination "nowhere"\. List them with `stampeded breakers list`/);
    });

    it('lists, pauses and resumes schedules', async () => {
      await sql.query(
        `INSERT INTO stampeded_schedules (key, queue, task, cron_expr, timezone, next_run_at) VALUES ('nightly', 'mail', 'digest', '0 3 * * *', 'Europe/Paris', '2030-01-01T02:00:00Z')`,
      );
      const list = await cli(url, ['schedules', 'list']);
      expect(list.code).toBe(0);
      expect(list.stdout).toMatch(/^nightly\s+mail\s+digest\s+0 3 \* \* \*\s+2030-01-01 03:00:00\s+Europe\/Paris\s+no/m);
      expect((await cli(url, ['schedules', 'pause', 'nightly'])).code).toBe(0);
      expect((await sql.query(`SELECT paused FROM stampeded_schedules WHERE key = 'nightly'`)).rows[0].paused).toBe(true);
      expect((await cli(url, ['schedules', 'list', '--json'])).json()[0]).toMatchObject({ key: 'nightly', paused: true });
      expect((await cli(url, ['schedules', 'resume', 'nightly'])).code).toBe(0);
      expect((await sql.query(`SELECT paused FROM stampeded_schedules WHERE key = 'nightly'`)).rows[0].paused).toBe(false);
      const triggered = await cli(url, ['schedules', 'trigger', 'nightly', '--json']);
      expect(triggered.code).toBe(0);
      const { rows: fired } = await sql.query(`SELECT queue, task, state FROM stampeded_jobs WHERE id = $1`, [triggered.json().job.id]);
      expect(fired[0]).toEqual({ queue: 'mail', task: 'digest', state: 'available' });
      expect((await sql.query(`SELECT next_run_at FROM stampeded_schedules WHERE key = 'nightly'`)).rows[0].next_run_at).toEqual(
        new Date('2030-01-01T02:00:00Z'),
      );
      const missing = await cli(url, ['schedules', 'pause', 'weekly']);
      expect(missing.code).toBe(1);
      expect(missing.stderr).toMatch(/No schedule with key "weekly"/);
    });

    it('redrives a dead-letter queue by task or fingerprint, with a dry run that moves nothing', async () => {
      const dry = await cli(url, ['dlq', 'redrive', 'billing-dead', '--dry-run', '--json']);
      expect(dry.code).toBe(0);
      expect(dry.json()).toMatchObject({
        dryRun: true,
        moved: 3,
        bySource: [
          { sourceQueue: 'billing', task: 'charge', jobs: 2 },
          { sourceQueue: 'billing', task: 'refund', jobs: 1 },
        ],
      });
      expect((await sql.query(`SELECT 1 FROM stampeded_jobs WHERE queue = 'billing-dead'`)).rowCount).toBe(3);

      // The two declined cards share a fingerprint: the card numbers are normalised out.
      const { rows: fp } = await sql.query(
        `SELECT DISTINCT encode(error_fingerprint, 'hex') AS fp FROM stampeded_jobs WHERE queue = 'billing' AND task = 'charge'`,
      );
      expect(fp).toHaveLength(1);
      const byFingerprint = await cli(url, ['dlq', 'redrive', 'billing-dead', '--fingerprint', fp[0].fp, '--batch-size', '1']);
      expect(byFingerprint.code).toBe(0);
      expect(byFingerprint.stdout).toMatch(/moved 2 job\(s\) from billing-dead/);
      expect(byFingerprint.stderr).toMatch(/redriven 1 jobs\nredriven 2 jobs/);

      const { rows: back } = await sql.query(
        `SELECT task, args, state, attempt, dead_letter_queue, source_id FROM stampeded_jobs WHERE queue = 'billing' AND state = 'available' ORDER BY args->>'card'`,
      );
      expect(back).toEqual([
        { task: 'charge', args: { card: '1111' }, state: 'available', attempt: 0, dead_letter_queue: 'billing-dead', source_id: null },
        { task: 'charge', args: { card: '4242' }, state: 'available', attempt: 0, dead_letter_queue: 'billing-dead', source_id: null },
      ]);

      const byTask = await cli(url, ['dlq', 'redrive', 'billing-dead', '--task', 'refund', '--json']);
      expect(byTask.json()).toMatchObject({ moved: 1 });
      expect((await sql.query(`SELECT 1 FROM stampeded_jobs WHERE queue = 'billing-dead'`)).rowCount).toBe(0);
      const counts = (await cli(url, ['status', '--json'])).json().queues;
      expect(counts.find((q: any) => q.queue === 'billing').counts.available).toBe(3);
      expect(counts.find((q: any) => q.queue === 'billing-dead')?.counts.available ?? 0).toBe(0);
      expect((await cli(url, ['dlq', 'redrive', 'billing-dead', '--fingerprint', 'zz'])).code).toBe(2);
    });

    it('prunes finished jobs in batches, with progress', async () => {
      await sql.query(
        `INSERT INTO stampeded_jobs (queue, task, state, finished_at) SELECT 'mail', 'old', 'completed', now() - interval '2 hours' FROM generate_series(1, 5)`,
      );
      const pruned = await cli(url, ['prune', '--batch-size', '2', '--json']);
      expect(pruned.code).toBe(0);
      expect(pruned.json()).toMatchObject({ jobs: 5 });
      expect(pruned.stderr).toMatch(/pruned 2 jobs\npruned 4 jobs\npruned 5 jobs/);
      expect((await sql.query(`SELECT 1 FROM stampeded_jobs WHERE task = 'old'`)).rowCount).toBe(0);
    });

    it('health exits 0 on a sound install and 1 when a partition lost its counter trigger', async () => {
      const healthy = await cli(url, ['health']);
      expect({ code: healthy.code, out: healthy.stdout.split('\n').slice(0, 4) }).toMatchObject({ code: 0 });
      expect(healthy.stdout).toMatch(/^healthy/);
      // No app runs against this database now: nobody leads maintenance, which is a warning, not a failure.
      expect(healthy.stdout).toMatch(/^warning: no process leads maintenance/m);
      await sql.query(`SELECT stampeded_create_queue('broken')`);
      await sql.query(`DROP TRIGGER stampeded_count_ins_trg ON stampeded_jobs_broken`);
      const sick = await cli(url, ['health', '--json']);
      expect(sick.code).toBe(1);
      expect(sick.json()).toMatchObject({ healthy: false, problems: [expect.stringMatching(/stampeded_jobs_broken \(broken\) lacks its counter trigger/)] });
    });
  });
});
