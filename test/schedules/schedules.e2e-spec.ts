import type { INestApplicationContext, Provider } from '@nestjs/common';
import type pg from 'pg';
import { SchedulesService, StampededConfigError, Task, migrate, type ScheduleDefinition, type TaskHandler } from '@stampeded/nestjs';
import { TestClock, type TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase } from '../support/test-app.js';

@Task('nightly-report', {
  queue: 'reports',
  priority: 5,
  maxAttempts: 3,
  expireSeconds: 120,
  deadLetterQueue: 'reports-dead',
  schedule: { cron: '0 3 * * *', timezone: 'Europe/Berlin', dstPolicy: 'wall_clock', missedPolicy: 'once', args: { kind: 'daily' } },
})
class NightlyReport implements TaskHandler<{ kind: string }> {
  async handle() {}
}

describe('schedules', () => {
  let db: TestDatabase;
  let sql: pg.Client;
  const apps: INestApplicationContext[] = [];

  beforeAll(async () => {
    db = await testDatabase();
    await migrate(db.url);
    sql = await sqlClient(db.url);
  });

  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    // Each test's schedules would otherwise be due in the next test's time.
    await sql.query(`DELETE FROM stampeded_schedules`);
  });

  afterAll(async () => {
    await sql?.end();
    await db?.drop();
  });

  /** An app whose scheduler fires only when the test says, at the test clock's time. */
  async function boot(clock: TestClock, providers: Provider[] = []): Promise<SchedulesService> {
    const app = await bootApp(db.url, {
      providers,
      stampeded: { clock, schedules: { enabled: false }, maintenance: { enabled: false }, worker: { enabled: false } },
    });
    apps.push(app);
    return app.get(SchedulesService);
  }

  const jobsOf = async (key: string) =>
    (
      await sql.query(
        `SELECT j.queue, j.task, j.args, j.priority, j.meta, o.occurrence_token AS token,
                j.max_attempts, j.expire_seconds, j.dead_letter_queue
           FROM stampeded_cron_occurrences o JOIN stampeded_jobs j ON j.id = o.job_id
          WHERE o.cron_key = $1 ORDER BY o.id`,
        [key],
      )
    ).rows;

  it('upserts a declared schedule at bootstrap under a stable key, and a restart does not move it', async () => {
    const clock = new TestClock('2026-06-01T00:00:00Z');
    const schedules = await boot(clock, [NightlyReport]);
    const declared = await schedules.get('nightly-report');
    expect(declared).toMatchObject({
      queue: 'reports',
      task: 'nightly-report',
      cron: '0 3 * * *',
      timezone: 'Europe/Berlin',
      dstPolicy: 'wall_clock',
      missedPolicy: 'once',
      priority: 5,
      paused: false,
      args: { kind: 'daily' },
      // 03:00 CEST.
      nextRunAt: new Date('2026-06-01T01:00:00Z'),
    });

    clock.set('2026-06-01T01:00:05Z');
    const fired = await schedules.fireDue();
    expect(fired).toEqual([
      {
        key: 'nightly-report',
        dueAt: new Date('2026-06-01T01:00:00Z'),
        jobId: expect.any(String),
        outcome: 'fired',
        nextRunAt: new Date('2026-06-02T01:00:00Z'),
      },
    ]);
    expect(await schedules.fireDue()).toEqual([]);
    expect(await jobsOf('nightly-report')).toEqual([
      {
        queue: 'reports',
        task: 'nightly-report',
        args: { kind: 'daily' },
        priority: 5,
        meta: { nestjs: { schedule: 'nightly-report' } },
        token: '2026-06-01 03:00',
        // The task's own job options, as an enqueue by hand would give it.
        max_attempts: 3,
        expire_seconds: 120,
        dead_letter_queue: 'reports-dead',
      },
    ]);
    const { jobId } = await schedules.trigger('nightly-report');
    const [triggered] = (await sql.query(`SELECT max_attempts, expire_seconds, dead_letter_queue FROM stampeded_jobs WHERE id = $1`, [jobId])).rows;
    expect(triggered).toEqual({ max_attempts: 3, expire_seconds: 120, dead_letter_queue: 'reports-dead' });

    // A redeploy hours later keeps the next run (and an operator's pause).
    await schedules.pause('nightly-report');
    clock.set('2026-06-01T09:00:00Z');
    const again = await boot(clock, [NightlyReport]);
    expect(await again.get('nightly-report')).toMatchObject({ nextRunAt: new Date('2026-06-02T01:00:00Z'), paused: true });
    await again.remove('nightly-report');
  });

  describe('DST transitions, both directions, both policies', () => {
    /** Walks the schedule from `from` through `n` occurrences, firing each at its time; returns the due instants and ledger tokens. */
    async function walk(definition: Omit<ScheduleDefinition, 'task'>, from: string, n: number) {
      const clock = new TestClock(from);
      const schedules = await boot(clock);
      await schedules.upsert({ ...definition, task: 'report' });
      const due: string[] = [];
      for (let i = 0; i < n; i++) {
        const { nextRunAt } = (await schedules.get(definition.key))!;
        clock.set(nextRunAt);
        const fired = await schedules.fireDue();
        expect(fired.map((f) => f.outcome)).toEqual(['fired']);
        due.push(fired[0].dueAt.toISOString());
      }
      const tokens = (await jobsOf(definition.key)).map((j) => j.token);
      await schedules.remove(definition.key);
      return { due, tokens };
    }

    // Europe/Berlin 2026: 02:00 CET -> 03:00 CEST on 29 March; 03:00 CEST -> 02:00 CET on 25 October.
    it('Europe/Berlin, spring forward: instant never fires the missing 02:30; wall_clock fires it at 03:00 CEST', async () => {
      const rule = { cron: '30 2 * * *', timezone: 'Europe/Berlin' };
      expect(await walk({ key: 'berlin-spring-instant', ...rule, dstPolicy: 'instant' }, '2026-03-28T12:00:00Z', 2)).toEqual({
        due: ['2026-03-30T00:30:00.000Z', '2026-03-31T00:30:00.000Z'],
        tokens: [String(Date.parse('2026-03-30T00:30:00Z') / 1000), String(Date.parse('2026-03-31T00:30:00Z') / 1000)],
      });
      expect(await walk({ key: 'berlin-spring-wall', ...rule, dstPolicy: 'wall_clock' }, '2026-03-28T12:00:00Z', 2)).toEqual({
        due: ['2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z'],
        tokens: ['2026-03-29 03:00', '2026-03-30 02:30'],
      });
    });

    it('Europe/Berlin, fall back: instant fires the repeated 02:30 twice; wall_clock once', async () => {
      const rule = { cron: '30 2 * * *', timezone: 'Europe/Berlin' };
      expect((await walk({ key: 'berlin-fall-instant', ...rule, dstPolicy: 'instant' }, '2026-10-24T12:00:00Z', 3)).due).toEqual([
        '2026-10-25T00:30:00.000Z',
        '2026-10-25T01:30:00.000Z',
        '2026-10-26T01:30:00.000Z',
      ]);
      expect(await walk({ key: 'berlin-fall-wall', ...rule, dstPolicy: 'wall_clock' }, '2026-10-24T12:00:00Z', 2)).toEqual({
        due: ['2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z'],
        tokens: ['2026-10-25 02:30', '2026-10-26 02:30'],
      });
    });

    // America/New_York 2026: 02:00 EST -> 03:00 EDT on 8 March; 02:00 EDT -> 01:00 EST on 1 November.
    it('America/New_York, spring forward', async () => {
      const rule = { cron: '30 2 * * *', timezone: 'America/New_York' };
      expect((await walk({ key: 'ny-spring-instant', ...rule, dstPolicy: 'instant' }, '2026-03-07T12:00:00Z', 2)).due).toEqual([
        '2026-03-09T06:30:00.000Z',
        '2026-03-10T06:30:00.000Z',
      ]);
      expect(await walk({ key: 'ny-spring-wall', ...rule, dstPolicy: 'wall_clock' }, '2026-03-07T12:00:00Z', 2)).toEqual({
        due: ['2026-03-08T07:00:00.000Z', '2026-03-09T06:30:00.000Z'],
        tokens: ['2026-03-08 03:00', '2026-03-09 02:30'],
      });
    });

    it('America/New_York, fall back', async () => {
      const rule = { cron: '30 1 * * *', timezone: 'America/New_York' };
      expect((await walk({ key: 'ny-fall-instant', ...rule, dstPolicy: 'instant' }, '2026-10-31T12:00:00Z', 3)).due).toEqual([
        '2026-11-01T05:30:00.000Z',
        '2026-11-01T06:30:00.000Z',
        '2026-11-02T06:30:00.000Z',
      ]);
      expect((await walk({ key: 'ny-fall-wall', ...rule, dstPolicy: 'wall_clock' }, '2026-10-31T12:00:00Z', 2)).due).toEqual([
        '2026-11-01T05:30:00.000Z',
        '2026-11-02T06:30:00.000Z',
      ]);
    });

    it('the ledger refuses the second instance of a repeated wall-clock time, whoever computed it', async () => {
      const clock = new TestClock('2026-10-25T00:30:00Z');
      const schedules = await boot(clock);
      await schedules.upsert({ key: 'fold', task: 'report', cron: '30 2 * * *', timezone: 'Europe/Berlin', dstPolicy: 'wall_clock' });
      await sql.query(`UPDATE stampeded_schedules SET next_run_at = '2026-10-25T00:30:00Z' WHERE key = 'fold'`);
      expect((await schedules.fireDue()).map((f) => f.outcome)).toEqual(['fired']);
      // A process with another idea of the next run (02:30 CET, the same wall time) is refused by the ledger.
      await sql.query(`UPDATE stampeded_schedules SET next_run_at = '2026-10-25T01:30:00Z' WHERE key = 'fold'`);
      clock.set('2026-10-25T01:30:00Z');
      const [second] = await schedules.fireDue();
      expect(second).toMatchObject({ outcome: 'duplicate', jobId: null, nextRunAt: new Date('2026-10-26T01:30:00Z') });
      expect(await jobsOf('fold')).toHaveLength(1);
    });
  });

  describe('missed runs', () => {
    async function afterDowntime(missedPolicy: 'once' | 'skip', rule: { cron?: string; every?: string }) {
      const clock = new TestClock('2026-01-01T09:30:00Z');
      const schedules = await boot(clock);
      const key = `missed-${missedPolicy}-${rule.cron ? 'cron' : 'every'}`;
      await schedules.upsert({ key, task: 'report', missedPolicy, ...rule });
      clock.set('2026-01-01T10:00:10Z');
      expect((await schedules.fireDue()).map((f) => f.outcome)).toEqual(['fired']);
      // Down for five hours and a bit.
      clock.set('2026-01-01T15:20:00Z');
      const afterRestart = await schedules.fireDue();
      const { nextRunAt } = (await schedules.get(key))!;
      clock.set(new Date(nextRunAt.getTime() + 1000));
      const resumed = await schedules.fireDue();
      return { afterRestart, nextRunAt, resumed, jobs: (await jobsOf(key)).length };
    }

    it("'once' fires one catch-up occurrence, then resumes the rhythm", async () => {
      const { afterRestart, nextRunAt, resumed, jobs } = await afterDowntime('once', { cron: '0 * * * *' });
      expect(afterRestart).toEqual([expect.objectContaining({ outcome: 'fired', dueAt: new Date('2026-01-01T11:00:00Z') })]);
      expect(nextRunAt).toEqual(new Date('2026-01-01T16:00:00Z'));
      expect(resumed).toEqual([expect.objectContaining({ outcome: 'fired', dueAt: new Date('2026-01-01T16:00:00Z') })]);
      expect(jobs).toBe(3);
    });

    it("'skip' fires none, and resumes at the next future occurrence", async () => {
      const { afterRestart, nextRunAt, resumed, jobs } = await afterDowntime('skip', { cron: '0 * * * *' });
      expect(afterRestart).toEqual([expect.objectContaining({ outcome: 'skipped', jobId: null })]);
      expect(nextRunAt).toEqual(new Date('2026-01-01T16:00:00Z'));
      expect(resumed.map((f) => f.outcome)).toEqual(['fired']);
      expect(jobs).toBe(2);
    });

    it('an interval keeps its phase across downtime', async () => {
      const { afterRestart, nextRunAt, jobs } = await afterDowntime('skip', { every: '30m' });
      expect(afterRestart.map((f) => f.outcome)).toEqual(['skipped']);
      // Created at 09:30, so the rhythm is :00 and :30.
      expect(nextRunAt).toEqual(new Date('2026-01-01T15:30:00Z'));
      expect(jobs).toBe(2);
    });
  });

  it('SchedulesService: upsert, list, pause, resume, trigger, remove', async () => {
    const clock = new TestClock('2026-02-01T00:00:00Z');
    const schedules = await boot(clock);
    const created = await schedules.upsert({ key: 'sync', task: 'sync-crm', queue: 'crm', every: '15m', args: { full: false } });
    expect(created).toMatchObject({ key: 'sync', intervalSeconds: 900, cron: null, nextRunAt: new Date('2026-02-01T00:15:00Z') });
    expect((await schedules.list()).map((s) => s.key)).toContain('sync');

    // Changing the args keeps the rhythm; changing the interval restarts it.
    clock.set('2026-02-01T00:05:00Z');
    expect(await schedules.upsert({ key: 'sync', task: 'sync-crm', queue: 'crm', every: '15m', args: { full: true } })).toMatchObject({
      args: { full: true },
      nextRunAt: new Date('2026-02-01T00:15:00Z'),
    });
    expect(await schedules.upsert({ key: 'sync', task: 'sync-crm', queue: 'crm', every: '10m', args: { full: true } })).toMatchObject({
      nextRunAt: new Date('2026-02-01T00:15:00Z'),
    });

    await schedules.pause('sync');
    clock.set('2026-02-01T00:15:30Z');
    expect(await schedules.fireDue()).toEqual([]);
    await schedules.resume('sync');
    expect((await schedules.fireDue()).map((f) => f.outcome)).toEqual(['fired']);

    const { jobId } = await schedules.trigger('sync');
    const [triggered] = (await sql.query(`SELECT queue, task, args FROM stampeded_jobs WHERE id = $1`, [jobId])).rows;
    expect(triggered).toEqual({ queue: 'crm', task: 'sync-crm', args: { full: true } });
    expect((await schedules.occurrences('sync')).map((o) => o.token)).toEqual([`trigger:${jobId}`, String(Date.parse('2026-02-01T00:15:00Z') / 1000)]);
    expect((await schedules.get('sync'))!.nextRunAt).toEqual(new Date('2026-02-01T00:25:00Z'));

    expect(await schedules.remove('sync')).toBe(true);
    expect(await schedules.remove('sync')).toBe(false);
    expect(await schedules.get('sync')).toBeUndefined();
    await expect(schedules.pause('sync')).rejects.toThrow(/No schedule with key "sync"/);
    await expect(schedules.trigger('sync')).rejects.toThrow(/No schedule with key "sync"/);
  });

  it("fires a setting the schedule did not store with the jobs table's DEFAULT for it, and one it stored as stored", async () => {
    const clock = new TestClock('2026-02-01T00:00:00Z');
    const schedules = await boot(clock);
    await schedules.upsert({ key: 'kept', task: 'sync-crm', queue: 'crm', every: '15m' });
    // As a schedule written before an option existed, or by another runtime, stores it: without the column.
    await sql.query(`UPDATE stampeded_schedules SET job_options = job_options - 'max_attempts' - 'expire_seconds' WHERE key = 'kept'`);
    await sql.query(`ALTER TABLE stampeded_jobs ALTER COLUMN max_attempts SET DEFAULT 7, ALTER COLUMN expire_seconds SET DEFAULT 90`);
    try {
      const { jobId } = await schedules.trigger('kept');
      const [job] = (
        await sql.query(`SELECT max_attempts, expire_seconds, max_deferrals, remove_on_complete, dead_letter_queue FROM stampeded_jobs WHERE id = $1`, [jobId])
      ).rows;
      expect(job).toEqual({ max_attempts: 7, expire_seconds: 90, max_deferrals: 100, remove_on_complete: false, dead_letter_queue: null });

      await sql.query(`UPDATE stampeded_schedules SET job_options = '{"max_deferrals": 3, "remove_on_complete": true}' WHERE key = 'kept'`);
      const again = await schedules.trigger('kept');
      const [stored] = (await sql.query(`SELECT max_attempts, max_deferrals, remove_on_complete FROM stampeded_jobs WHERE id = $1`, [again.jobId])).rows;
      expect(stored).toEqual({ max_attempts: 7, max_deferrals: 3, remove_on_complete: true });
    } finally {
      await sql.query(`ALTER TABLE stampeded_jobs ALTER COLUMN max_attempts SET DEFAULT 25, ALTER COLUMN expire_seconds SET DEFAULT 3600`);
    }
  });

  it('fires into an ordering key: a job behind an unfinished one of its key waits for its turn', async () => {
    const clock = new TestClock('2026-03-01T00:00:00Z');
    const schedules = await boot(clock);
    await expect(schedules.upsert({ key: 'keyed-bad', task: 'sync-crm', queue: 'crm', every: '1m', orderingKey: '' })).rejects.toThrow(
      /Schedule "keyed-bad".*orderingKey must be a non-empty string/,
    );
    expect(await schedules.get('keyed-bad')).toBeUndefined();

    const created = await schedules.upsert({ key: 'keyed', task: 'sync-crm', queue: 'crm', every: '1m', orderingKey: 'crm-account-7' });
    expect(created).toMatchObject({ key: 'keyed', orderingKey: 'crm-account-7' });
    const first = (await schedules.trigger('keyed')).jobId;
    const second = (await schedules.trigger('keyed')).jobId;
    const { rows } = await sql.query(
      `SELECT id::text, state, ordering_key, ordering_position = id AS placed FROM stampeded_jobs WHERE id = ANY($1::uuid[]) ORDER BY id`,
      [[first, second]],
    );
    expect(rows).toEqual([
      { id: first, state: 'available', ordering_key: 'crm-account-7', placed: true },
      { id: second, state: 'pending', ordering_key: 'crm-account-7', placed: true },
    ]);
    // A schedule without a key fires jobs without one, as before.
    await schedules.upsert({ key: 'keyed', task: 'sync-crm', queue: 'crm', every: '1m' });
    const plain = (await schedules.trigger('keyed')).jobId;
    expect((await sql.query(`SELECT state, ordering_key FROM stampeded_jobs WHERE id = $1`, [plain])).rows).toEqual([
      { state: 'available', ordering_key: null },
    ]);
  });

  it('fires each occurrence once when many fire at the same moment', async () => {
    const clock = new TestClock('2026-03-01T00:00:00Z');
    const services = await Promise.all([boot(clock), boot(clock), boot(clock)]);
    await services[0].upsert({ key: 'race', task: 'report', every: '1m' });
    clock.set('2026-03-01T00:01:00Z');
    const all = (await Promise.all(services.flatMap((s) => [s.fireDue(), s.fireDue()]))).flat();
    expect(all.filter((f) => f.outcome === 'fired')).toHaveLength(1);
    expect(await jobsOf('race')).toHaveLength(1);
  });

  describe('bad input: a clear error naming the schedule and the field, and nothing written', () => {
    it.each([
      [{ cron: '0 25 * * *' }, /Schedule "bad": cron "0 25 \* \* \*" is not a valid cron expression/],
      [{ cron: '0 3 * * *', timezone: 'Mars/Olympus_Mons' }, /Schedule "bad": timezone "Mars\/Olympus_Mons" is not a known IANA time zone/],
      [{ every: 90 }, /Schedule "bad": every takes a duration with its unit, such as '90s' or '15m', got the number 90/],
      [{ every: '0m' }, /Schedule "bad": every must be a duration of at least 1 ms, got "0m"/],
      [{ every: '-5m' }, /Schedule "bad": every must be milliseconds or a duration such as '90s'/],
      [{ cron: '0 3 * * *', every: '1h' }, /Schedule "bad": cron\/every are both set; give exactly one of them/],
      [{}, /Schedule "bad": cron\/every are both missing/],
    ])('upsert(%j)', async (rule, message) => {
      const schedules = await boot(new TestClock('2026-01-01T00:00:00Z'));
      await expect(schedules.upsert({ key: 'bad', task: 'report', ...rule } as ScheduleDefinition)).rejects.toThrow(message);
      await expect(schedules.upsert({ key: 'bad', task: 'report', ...rule } as ScheduleDefinition)).rejects.toThrow(StampededConfigError);
      expect(await schedules.get('bad')).toBeUndefined();
    });

    it('at bootstrap, from @Task()', async () => {
      @Task('broken-cron', { schedule: { cron: 'every day at noon' } })
      class BrokenCron {
        handle() {}
      }
      await expect(boot(new TestClock(Date.now()), [BrokenCron])).rejects.toThrow(
        /Schedule "broken-cron": cron "every day at noon" is not a valid cron expression/,
      );

      @Task('no-rule', { schedule: { timezone: 'Europe/Berlin' } })
      class NoRule {
        handle() {}
      }
      await expect(boot(new TestClock(Date.now()), [NoRule])).rejects.toThrow(/Schedule "no-rule": cron\/every are both missing/);

      @Task('bad-zone', { schedule: { cron: '0 3 * * *', timezone: 'Europe/Atlantis', key: 'zone-key' } })
      class BadZone {
        handle() {}
      }
      await expect(boot(new TestClock(Date.now()), [BadZone])).rejects.toThrow(/Schedule "zone-key": timezone "Europe\/Atlantis"/);
      const { rows } = await sql.query(`SELECT key FROM stampeded_schedules WHERE key IN ('broken-cron', 'no-rule', 'zone-key')`);
      expect(rows).toEqual([]);
    });

    it("args that fail the task's validate option, at bootstrap and by upsert()", async () => {
      const validate = (args: unknown) => (typeof (args as { kind?: unknown }).kind === 'string' ? [] : [{ message: 'Required', path: ['kind'] }]);
      @Task('checked-report', { validate, schedule: { every: '1h', args: { kinds: 'daily' } } })
      class CheckedReport {
        handle() {}
      }
      await expect(boot(new TestClock(Date.now()), [CheckedReport])).rejects.toThrow(
        'Schedule "checked-report": the args of task "checked-report" fail its validate option: kind: Required. Nothing was written; fix the args.',
      );

      @Task('checked-report', { validate })
      class CheckedReportUnscheduled {
        handle() {}
      }
      const schedules = await boot(new TestClock(Date.now()), [CheckedReportUnscheduled]);
      await expect(schedules.upsert({ key: 'hourly', task: 'checked-report', every: '1h', args: { kind: 3 } })).rejects.toThrow(
        /Schedule "hourly": the args of task "checked-report" fail its validate option: kind: Required/,
      );
      expect(await schedules.get('hourly')).toBeUndefined();
      await schedules.upsert({ key: 'hourly', task: 'checked-report', every: '1h', args: { kind: 'daily' } });
      expect((await schedules.get('hourly'))?.args).toEqual({ kind: 'daily' });
    });
  });
});
