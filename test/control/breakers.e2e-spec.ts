import type { INestApplicationContext } from '@nestjs/common';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { BreakerOpenError, QueueControlService, QueueService, Task, migrate, type Job, type TaskHandler } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';
import { WorkerProcess } from '../support/worker-process.js';

const LONG = process.env.STAMPEDED_CONTROL_LONG === '1';

const partnerCalls: string[] = [];
let partnerThrottles = 0;

@Task('partner-call', { queue: 'partners' })
class PartnerCall implements TaskHandler<{ n: number }> {
  handle(args: { n: number }) {
    partnerCalls.push(String(args.n));
    if (partnerThrottles > 0) {
      partnerThrottles--;
      // What a handler does with an HTTP 429 and its Retry-After header.
      throw BreakerOpenError.fromRetryAfter('30', 30_000, 'partner answered 429 Too Many Requests');
    }
  }
}

describe('queue control: circuit breakers per destination, for the whole fleet', () => {
  let db: TestDatabase;
  let sql: pg.Client;
  const apps: INestApplicationContext[] = [];
  const fleet: WorkerProcess[] = [];

  beforeAll(async () => {
    db = await testDatabase();
    await migrate(db.url);
    sql = await sqlClient(db.url);
  });

  afterEach(async () => {
    await Promise.all(fleet.splice(0).map((p) => p.stop()));
    await Promise.all(apps.splice(0).map((a) => a.close()));
    await sql.query(`DELETE FROM stampeded_jobs; DELETE FROM stampeded_breakers; DELETE FROM stampeded_workers`);
    partnerCalls.length = 0;
  });

  afterAll(async () => {
    await sql?.end();
    await db?.drop();
  });

  async function boot(): Promise<INestApplicationContext> {
    const app = await bootApp(db.url, {
      via: 'connection',
      providers: [PartnerCall],
      stampeded: { worker: { pollIntervalMs: 100 }, maintenance: { enabled: false }, control: { refreshInterval: 100 } },
    });
    apps.push(app);
    return app;
  }

  const job = async (id: string) => (await sql.query(`SELECT * FROM stampeded_jobs WHERE id = $1`, [id])).rows[0];

  it('a handler opens the breaker on purpose (429 with Retry-After); the fleet defers its jobs with the attempt refunded; an operator closes it', async () => {
    const app = await boot();
    const queue = app.get(QueueService);
    const control = app.get(QueueControlService);
    partnerThrottles = 1;
    const first = await queue.enqueue('partner-call', { n: 1 }, { destination: 'partner' });
    await waitFor(async () => (await job(first.id)).failure_kind === 'breaker_open', 'the 429 to defer the job');
    expect(await job(first.id)).toMatchObject({ state: 'retryable', attempt: 0, deferrals: 1 });
    const [breaker] = await control.breakers();
    expect(breaker).toMatchObject({ destination: 'partner', state: 'open', openedBy: 'handler', reason: 'partner answered 429 Too Many Requests' });
    expect(breaker.openUntil!.getTime() - Date.now()).toBeGreaterThan(20_000);

    // Another job for the same destination is not run at all while the breaker is open.
    const second = await queue.enqueue('partner-call', { n: 2 }, { destination: 'partner' });
    await waitFor(async () => (await job(second.id)).failure_kind === 'breaker_open', 'the second job to be deferred');
    expect(partnerCalls).toEqual(['1']);
    expect(await job(second.id)).toMatchObject({ state: 'retryable', attempt: 0, deferrals: 1 });
    expect((await job(second.id)).last_error).toMatch(/circuit breaker for destination "partner" is open/);

    // The operator closes it: the deferred jobs are due at once, not at the end of the 30 s.
    expect(await control.closeBreaker('partner', { by: 'ana' })).toBe(true);
    await waitFor(async () => (await job(first.id)).state === 'completed' && (await job(second.id)).state === 'completed', 'both jobs to run');
    expect(partnerCalls.sort()).toEqual(['1', '1', '2']);
    // Who closed it stays in the row with the time.
    const closed = (await control.breakers())[0];
    expect(closed).toMatchObject({ state: 'closed', failures: 0, closedBy: 'ana' });
    expect(closed.closedAt).toBeInstanceOf(Date);
  });

  it('a breaker closed by another process: the jobs it made due run at once, not deferred again by a worker that has not re-read it', async () => {
    // A refresh interval longer than the test: this worker learns of the close only from the jobs.
    const app = await bootApp(db.url, {
      via: 'connection',
      providers: [PartnerCall],
      stampeded: { worker: { pollIntervalMs: 100 }, maintenance: { enabled: false }, control: { refreshInterval: 60_000 } },
    });
    apps.push(app);
    const queue = app.get(QueueService);
    partnerThrottles = 1;
    const first = await queue.enqueue('partner-call', { n: 1 }, { destination: 'partner' });
    await waitFor(async () => (await job(first.id)).failure_kind === 'breaker_open', 'the 429 to defer the job');
    const second = await queue.enqueue('partner-call', { n: 2 }, { destination: 'partner' });
    await waitFor(async () => (await job(second.id)).failure_kind === 'breaker_open', 'the second job to be deferred');
    expect(partnerCalls).toEqual(['1']);

    // What QueueControlService.closeBreaker() runs, from another process.
    expect((await sql.query(`SELECT stampeded_breaker_reset('partner') AS closed`)).rows[0].closed).toBe(true);
    await waitFor(async () => (await job(first.id)).state === 'completed' && (await job(second.id)).state === 'completed', 'both jobs to run', 10_000);
    expect(partnerCalls.sort()).toEqual(['1', '1', '2']);
    // Each was deferred once, by the breaker that was open; none again after the close.
    expect((await job(first.id)).deferrals).toBe(1);
    expect((await job(second.id)).deferrals).toBe(1);
  });

  it('a worker keeps the breaker it just tripped over a refresh that read the breakers before the trip', async () => {
    const app = await bootApp(db.url, {
      via: 'connection',
      stampeded: { worker: { enabled: false }, maintenance: { enabled: false }, control: { refreshInterval: 60_000 } },
    });
    apps.push(app);
    const workerId = (await sql.query(`INSERT INTO stampeded_workers (hostname, pid) VALUES ('test', 1) RETURNING id::text`)).rows[0].id;
    const gate = await app.get(QueueControlService).gateFor(workerId, ['partners'], 5);
    const job = (n: number) => ({ id: `00000000-0000-7000-8000-00000000000${n}`, queue: 'partners', destination: 'partner', tenantId: null }) as unknown as Job;
    try {
      // A refresh that has read the breakers (none open) and waits on the
      // policies, held by this transaction, while the worker trips one.
      await sql.query('BEGIN');
      await sql.query('LOCK TABLE stampeded_queue_policies IN ACCESS EXCLUSIVE MODE');
      const refreshing = gate.refreshNow();
      await new Promise((r) => setTimeout(r, 200));
      expect(await gate.failed(job(1), BreakerOpenError.fromRetryAfter('30', 30_000, 'partner answered 429'), 'partner answered 429')).toMatchObject({
        kind: 'breaker_open',
      });
      await sql.query('COMMIT');
      await refreshing;
      // The read's older "no breaker open" did not win: the next job of the destination waits.
      expect(await gate.admit(job(2))).toMatchObject({ kind: 'breaker_open' });
    } finally {
      await sql.query('ROLLBACK').catch(() => {});
      await gate.stop();
    }
  });

  it('an operator opens a breaker; a job deferred more than max_deferrals times is discarded and dead-lettered', async () => {
    const app = await boot();
    const control = app.get(QueueControlService);
    expect(await control.openBreaker('partner', { for: '1h', by: 'ana', reason: 'partner maintenance window' })).toMatchObject({
      state: 'open',
      openedBy: 'ana',
      reason: 'partner maintenance window',
    });
    await expect(control.openBreaker('', {})).rejects.toThrow(/give the destination/);
    const queue = app.get(QueueService);
    const patient = await queue.enqueue('partner-call', { n: 1 }, { destination: 'partner' });
    const impatient = await queue.enqueue('partner-call', { n: 2 }, { destination: 'partner', maxDeferrals: 0, deadLetterQueue: 'partners-dead' });
    await waitFor(async () => (await job(impatient.id)).state === 'discarded', 'the impatient job to be discarded');
    expect(await job(impatient.id)).toMatchObject({ failure_kind: 'breaker_open', attempt: 0, deferrals: 1 });
    const { rows: letters } = await sql.query(`SELECT queue, source_id::text, task FROM stampeded_jobs WHERE queue = 'partners-dead'`);
    expect(letters).toEqual([{ queue: 'partners-dead', source_id: impatient.id, task: 'partner-call' }]);
    await waitFor(async () => (await job(patient.id)).failure_kind === 'breaker_open', 'the patient job to be deferred');
    const deferred = await job(patient.id);
    expect(deferred).toMatchObject({ state: 'retryable', attempt: 0, deferrals: 1 });
    // Deferred to the end of the operator's hour, not retried every second.
    expect(new Date(deferred.scheduled_at).getTime() - Date.now()).toBeGreaterThan(50 * 60_000);
    expect(partnerCalls).toEqual([]);
  });

  it(
    'a destination down under a steady stream, with three worker processes: no job burns its attempts, none is lost, all complete after it recovers',
    async () => {
      const failMs = LONG ? 60_000 : 5000;
      const threshold = 3;
      const cooldownMs = 1000;
      const stampeded = {
        worker: { concurrency: 5, pollIntervalMs: 100 },
        maintenance: { leaderCheckIntervalMs: 500 },
        control: { refreshInterval: 200, breakers: { default: { threshold, cooldown: cooldownMs, window: '10s' } } },
      };
      const downFile = join(tmpdir(), `stampeded-down-${process.pid}-${Date.now()}`);
      const workers = [start(), start(), start()];
      function start() {
        const p = WorkerProcess.start({ url: db.url, tasks: 'control', stampeded: { migrations: 'auto', ...stampeded }, downFile });
        fleet.push(p);
        return p;
      }
      await Promise.all(workers.map((w) => w.ready()));

      // Three jobs every 100 ms: a second while the destination is up, failMs while it is down, a second after it recovers.
      let total = 0;
      const started = Date.now();
      while (Date.now() < started + failMs + 2000) {
        const elapsed = Date.now() - started;
        if (elapsed >= 1000 && elapsed < 1000 + failMs && !existsSync(downFile)) writeFileSync(downFile, 'down');
        if (elapsed >= 1000 + failMs && existsSync(downFile)) rmSync(downFile);
        await sql.query(
          `INSERT INTO stampeded_jobs (queue, task, args, destination, max_attempts) SELECT 'calls', 'call', '{"ms": 5}', 'api', 5 FROM generate_series(1, 3)`,
        );
        total += 3;
        await new Promise((r) => setTimeout(r, 100));
      }
      rmSync(downFile, { force: true });
      await waitFor(
        async () => (await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE state = 'completed'`)).rows[0].n === total,
        'every call to complete after the destination recovered',
        LONG ? 300_000 : 60_000,
        100,
      );
      const { rows } = await sql.query(
        `SELECT count(*)::int AS jobs,
              count(*) FILTER (WHERE state <> 'completed')::int AS not_completed,
              coalesce(sum(attempt - 1), 0)::int AS attempts_burned,
              max(attempt)::int AS max_attempt,
              count(*) FILTER (WHERE deferrals > 0)::int AS deferred_jobs,
              coalesce(sum(deferrals), 0)::int AS deferrals,
              max(deferrals)::int AS max_deferrals,
              (SELECT count(*)::int FROM stampeded_jobs j, jsonb_array_elements(j.errors) e WHERE e->>'kind' = 'raised') AS raised
         FROM stampeded_jobs`,
      );
      const r = rows[0];
      process.stderr.write(
        `breaker: destination down ${failMs / 1000} s, 3 processes, ${r.jobs} jobs: ${r.raised} real failures (attempts spent on the outage), ` +
          `${r.deferred_jobs} jobs deferred ${r.deferrals} times (max ${r.max_deferrals} for one job), highest attempt ${r.max_attempt}, none lost\n`,
      );
      expect(r).toMatchObject({ jobs: total, not_completed: 0 });
      // The failures that opened the breaker (threshold, a few more in flight across three processes) and one probe per cooldown.
      expect(r.raised).toBeLessThan(threshold * 3 + (failMs / cooldownMs) * 2);
      expect(r.max_attempt).toBeLessThan(5);
      expect(r.deferred_jobs).toBeGreaterThan(total / 4);
    },
    LONG ? 900_000 : 90_000,
  );
});
