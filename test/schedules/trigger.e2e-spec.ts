import { Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type pg from 'pg';
import { SchedulesService, StampededModule, Task, type TaskHandler } from '@stampeded/nestjs';
import { StampededDashboardModule } from '@stampeded/dashboard';
import type { TestDatabase } from '@stampeded/testing';
import { sqlClient, testDatabase } from '../support/test-app.js';
import { cli } from '../support/cli.js';

@Task('sync-account', {
  queue: 'crm',
  maxAttempts: 4,
  expireSeconds: 90,
  backoff: { baseMs: 250, maxMs: 60_000 },
  deadLetterQueue: 'crm-dead',
  removeOnComplete: true,
})
class SyncAccount implements TaskHandler<{ account: number }> {
  async handle() {}
}

/** What a job's row holds apart from what differs between any two jobs: its id, place in line, times and state. */
const SETTINGS = `to_jsonb(j) - ARRAY['id', 'ordering_position', 'scheduled_at', 'inserted_at', 'state']`;

/**
 * Triggering a schedule by hand runs the core's one statement, whether the
 * app, the dashboard or the CLI asks: the job carries the schedule's stored
 * job options and ordering key, and the trigger is recorded in the ledger.
 */
describe('a schedule triggered by hand', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let base: string;
  let sql: pg.Client;
  let schedules: SchedulesService;

  beforeAll(async () => {
    db = await testDatabase();
    @Module({
      imports: [
        StampededModule.forRoot({
          connection: { url: db.url },
          migrations: 'auto',
          worker: { enabled: false },
          schedules: { enabled: false },
          maintenance: { enabled: false },
        }),
        StampededDashboardModule.forRoot({ path: '/stampeded', auth: () => true, refreshSeconds: 0 }),
      ],
      providers: [SyncAccount],
    })
    class TriggerTestModule {}
    app = await NestFactory.create(TriggerTestModule, { logger: ['error', 'warn'] });
    await app.listen(0, '127.0.0.1');
    base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    sql = await sqlClient(db.url);
    schedules = app.get(SchedulesService);
  });

  afterAll(async () => {
    await sql?.end();
    await app?.close();
    await db?.drop();
  });

  async function dashboardTrigger(key: string): Promise<string> {
    const csrf = await fetch(`${base}/stampeded/api/csrf`);
    const cookie = csrf.headers.getSetCookie()[0].split(';')[0];
    const { token } = (await csrf.json()) as { token: string };
    const response = await fetch(`${base}/stampeded/api/schedules/${key}/trigger`, { method: 'POST', headers: { cookie, 'x-stampeded-csrf': token } });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { key: string; job: { id: string; queue: string } };
    expect(body).toEqual({ key, job: { id: expect.any(String), queue: 'crm' } });
    return body.job.id;
  }

  async function cliTrigger(key: string): Promise<string> {
    const run = await cli(db.url, ['schedules', 'trigger', key, '--json']);
    expect(run.code).toBe(0);
    expect(run.json()).toEqual({ key, job: { id: expect.any(String), queue: 'crm' } });
    return run.json().job.id;
  }

  it("from the dashboard and the CLI, enqueues the job the core's trigger does, in its key's order and its ledger", async () => {
    await schedules.upsert({
      key: 'account-7',
      task: 'sync-account',
      every: '1h',
      args: { account: 7 },
      tenantId: 'acme',
      priority: 3,
      orderingKey: 'account:7',
    });
    const before = (await schedules.get('account-7'))!.nextRunAt;

    const fromCore = (await schedules.trigger('account-7')).jobId;
    const fromDashboard = await dashboardTrigger('account-7');
    const fromCli = await cliTrigger('account-7');
    const ids = [fromCore, fromDashboard, fromCli];

    const { rows } = await sql.query(
      `SELECT j.id::text AS id, j.state, ${SETTINGS} AS settings FROM stampeded_jobs j WHERE j.id = ANY($1::uuid[]) ORDER BY j.ordering_position`,
      [ids],
    );
    // In its key's order, in trigger order: the first runs, each later one waits behind it.
    expect(rows.map((r) => [r.id, r.state])).toEqual([
      [fromCore, 'available'],
      [fromDashboard, 'pending'],
      [fromCli, 'pending'],
    ]);
    const core = rows[0].settings;
    // The schedule's stored job options and key, as the core's trigger carries them.
    expect(core).toMatchObject({
      queue: 'crm',
      task: 'sync-account',
      args: { account: 7 },
      tenant_id: 'acme',
      priority: 3,
      max_attempts: 4,
      expire_seconds: 90,
      backoff_base_ms: 250,
      backoff_max_ms: 60_000,
      dead_letter_queue: 'crm-dead',
      remove_on_complete: true,
      ordering_key: 'account:7',
    });
    expect(rows[1].settings).toEqual(core);
    expect(rows[2].settings).toEqual(core);

    // Each trigger is in the occurrence ledger under a token of its own; the next run is not moved.
    expect((await schedules.occurrences('account-7')).map((o) => [o.token, o.jobId])).toEqual(ids.reverse().map((id) => [`trigger:${id}`, id]));
    expect((await schedules.get('account-7'))!.nextRunAt).toEqual(before);
  });

  it('from the dashboard and the CLI, says when there is no such schedule', async () => {
    const csrf = await fetch(`${base}/stampeded/api/csrf`);
    const cookie = csrf.headers.getSetCookie()[0].split(';')[0];
    const { token } = (await csrf.json()) as { token: string };
    const response = await fetch(`${base}/stampeded/api/schedules/nightly/trigger`, { method: 'POST', headers: { cookie, 'x-stampeded-csrf': token } });
    expect(response.status).toBe(404);
    expect(((await response.json()) as { message: string }).message).toMatch(/No schedule with key "nightly"/);
    const run = await cli(db.url, ['schedules', 'trigger', 'nightly']);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/No schedule with key "nightly"/);
  });
});
