import { Module, type INestApplication, type INestApplicationContext, type Provider } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type pg from 'pg';
import {
  JobEvents,
  MaintenanceService,
  QueueService,
  StampededConfigError,
  StampededModule,
  Task,
  migrate,
  type JobContext,
  type JobEvent,
  type StampededModuleOptions,
  type TaskHandler,
} from '@stampeded/nestjs';
import { StampededDashboardModule } from '@stampeded/dashboard';
import type { TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';
import { findPgBouncer, startPgBouncer, type StartedPgBouncer } from '../support/pgbouncer.js';
import { WorkerProcess, type WorkerProcessConfig } from '../support/worker-process.js';

const PGBOUNCER = findPgBouncer();
if (!PGBOUNCER) {
  process.stderr.write(
    '\n\n' +
      '************************************************************************\n' +
      '* SKIPPED: the PgBouncer suite (test/pooler/pgbouncer.e2e-spec.ts).    *\n' +
      '* pgbouncer is not installed: apt-get install -y pgbouncer to run it.  *\n' +
      '************************************************************************\n\n',
  );
}
const withPgBouncer = PGBOUNCER ? describe : describe.skip;

@Task('echo', { queue: 'pooled' })
class Echo implements TaskHandler<{ n: number }> {
  async handle(args: { n: number }) {
    return { n: args.n };
  }
}

/** Runs until its job is cancelled, and says that its signal fired. */
const aborted = new Set<string>();
@Task('until-cancelled', { queue: 'cancellable' })
class UntilCancelled implements TaskHandler {
  async handle(_args: object, ctx: JobContext) {
    await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
    aborted.add(ctx.id);
  }
}

@Task('tick', { queue: 'ticks', schedule: { every: '1s', missedPolicy: 'once' } })
class Tick implements TaskHandler {
  async handle() {}
}

@Task('live', { queue: 'live' })
class Live implements TaskHandler {
  async handle() {}
}

/** The mode under test: a transaction-mode pooler, no direct connection. */
const POOLED: StampededModuleOptions = { pooler: 'transaction' };

// Everything below goes through a real PgBouncer in transaction mode, where
// two transactions of one client may run on two server connections and
// another client's transaction may run on the first one's: session advisory
// locks, LISTEN and named prepared statements all break there.
withPgBouncer('behind PgBouncer in transaction mode', () => {
  let db: TestDatabase;
  let bouncer: StartedPgBouncer;
  /** The test database, through PgBouncer. */
  let pooled: string;
  /** A direct client, for what the database holds. */
  let sql: pg.Client;
  const apps: INestApplicationContext[] = [];
  const fleet: WorkerProcess[] = [];

  beforeAll(async () => {
    db = await testDatabase();
    bouncer = await startPgBouncer(process.env.STAMPEDED_TEST_SERVER_URL!, PGBOUNCER);
    pooled = bouncer.through(db.url);
    // The migrations, through the pooler too: one transaction.
    await migrate(pooled);
    sql = await sqlClient(db.url);
  }, 60_000);

  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    await Promise.all(fleet.splice(0).map((p) => p.stop()));
  });

  afterAll(async () => {
    await sql?.end();
    await bouncer?.stop();
    await db?.drop();
  });

  async function boot(stampeded: StampededModuleOptions, providers: Provider[] = []): Promise<INestApplicationContext> {
    const app = await bootApp(pooled, { via: 'connection', providers, stampeded: { ...POOLED, ...stampeded } });
    apps.push(app);
    return app;
  }

  /** Session advisory locks held on this database, by anyone. */
  async function sessionLocks(): Promise<number> {
    const { rows } = await sql.query(
      `SELECT count(*)::int AS n FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    );
    return rows[0].n;
  }

  it('runs jobs with unnamed statements, holding no session lock and no LISTEN', async () => {
    const app = await boot({ worker: { concurrency: 8, pollIntervalMs: 100 }, poolSize: 6, maintenance: { leaderCheckIntervalMs: 200 } }, [Echo]);
    const queue = app.get(QueueService);
    const ids = (await queue.enqueueMany(Array.from({ length: 300 }, (_, n) => ({ task: 'echo', args: { n } })))).map((r) => r.id);
    await waitFor(
      async () =>
        (await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE id = ANY($1::uuid[]) AND state = 'completed'`, [ids])).rows[0].n === 300,
      'every job to complete',
    );
    const { rows } = await sql.query(
      `SELECT attempt, count(*)::int AS n, bool_and((result->>'n')::int = (args->>'n')::int) AS own FROM stampeded_jobs
                                       WHERE id = ANY($1::uuid[]) GROUP BY attempt`,
      [ids],
    );
    expect(rows).toEqual([{ attempt: 1, n: 300, own: true }]);
    // The leader is the lease's holder, and no session lock stands for it.
    await waitFor(() => app.get(MaintenanceService).isLeader, 'the lease to be taken');
    const lease = (await sql.query(`SELECT name, term::int AS term, expires_at > now() AS live FROM stampeded_leader_leases`)).rows;
    expect(lease).toEqual([{ name: 'maintenance', term: 1, live: true }]);
    expect(await sessionLocks()).toBe(0);
    // No connection of its own for the leader or for LISTEN: every statement went through the pool, through PgBouncer.
    const dedicated = await sql.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name IN ('stampeded-leader', 'stampeded-listen')`,
    );
    expect(dedicated.rows[0].n).toBe(0);
  });

  it('hears a cancel of a running job without LISTEN: the handler is aborted', async () => {
    const app = await boot({ worker: { pollIntervalMs: 100 }, maintenance: { enabled: false } }, [UntilCancelled]);
    const queue = app.get(QueueService);
    const { id } = await queue.enqueue('until-cancelled', {});
    await waitFor(async () => (await sql.query(`SELECT state FROM stampeded_jobs WHERE id = $1`, [id])).rows[0].state === 'executing', 'the job to run');
    expect(await queue.cancel(id)).toMatchObject({ cancelled: true });
    await waitFor(() => aborted.has(id), "the handler's signal to fire");
    expect((await sql.query(`SELECT state FROM stampeded_jobs WHERE id = $1`, [id])).rows[0].state).toBe('cancelled');
  });

  it('waitFor() learns of a job another process ran, by polling', async () => {
    const waiter = await boot({ worker: { enabled: false }, maintenance: { enabled: false } });
    const { id } = await waiter.get(QueueService).enqueue('echo', { n: 7 }, { queue: 'pooled' });
    const waiting = waiter.get(QueueService).waitFor(id, { timeoutMs: 30_000 });
    await boot({ worker: { pollIntervalMs: 100 }, maintenance: { enabled: false } }, [Echo]);
    const job = await waiting;
    expect(job).toMatchObject({ id, state: 'completed', result: { n: 7 } });
  });

  it('with a direct listenConnection, LISTEN wakes workers and fleet events reach other apps', async () => {
    const direct = { listenConnection: { url: db.url }, events: 'fleet' as const, maintenance: { enabled: false } };
    // A poll slower than the test's deadline: only a notification can wake the worker in time.
    await boot({ ...direct, worker: { pollIntervalMs: 600_000, heartbeatIntervalMs: 200 } }, [Echo]);
    const observer = await boot({ ...direct, worker: { enabled: false } });
    const queue = observer.get(QueueService);
    const heard = new Set<string>();
    observer.get(JobEvents).events$.subscribe((e: JobEvent) => e.type === 'completed' && e.origin === 'fleet' && heard.add(e.jobId));
    // Workers notify only once they know someone listens (its announcement, or their heartbeat's count of its lock).
    await waitFor(
      async () => {
        const { id } = await queue.enqueue('echo', { n: 0 }, { queue: 'pooled' });
        await waitFor(() => heard.has(id), 'a probe', 2000).catch(() => undefined);
        return heard.has(id);
      },
      'the worker, notifying',
      30_000,
    );
    const ids = (await queue.enqueueMany([1, 2, 3].map((n) => ({ task: 'echo', args: { n }, options: { queue: 'pooled' } })))).map((r) => r.id);
    await waitFor(() => ids.every((id) => heard.has(id)), 'the three completions, heard');
    // Both apps LISTEN on a direct connection of their own, and only there.
    const { rows } = await sql.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'stampeded-listen'`,
    );
    expect(rows[0].n).toBe(2);
  });

  it('the leader runs the reaper, the expirer and the pruner through the pooler', async () => {
    const dead = (
      await sql.query(`INSERT INTO stampeded_workers (hostname, pid, last_heartbeat) VALUES ('gone', 1, now() - interval '1 hour') RETURNING id::text`)
    ).rows[0].id;
    const orphan = (
      await sql.query(
        `INSERT INTO stampeded_jobs (queue, task, state, attempt, claimed_by, claimed_at) VALUES ('live', 'live', 'executing', 1, $1, now()) RETURNING id::text`,
        [dead],
      )
    ).rows[0].id;
    const stuck = (
      await sql.query(
        `WITH w AS (INSERT INTO stampeded_workers (hostname, pid) VALUES ('stuck', 1) RETURNING id)
         INSERT INTO stampeded_jobs (queue, task, state, attempt, max_attempts, expire_seconds, claimed_by, claimed_at, heartbeat_at)
         SELECT 'stuck', 'x', 'executing', 1, 1, 1, w.id, now() - interval '1 minute', now() - interval '1 minute' FROM w
         RETURNING id::text`,
      )
    ).rows[0].id;
    await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, state, finished_at, inserted_at)
       SELECT 'old', 'x', 'completed', now() - interval '10 days', now() - interval '10 days' FROM generate_series(1, 1000)`,
    );
    const app = await boot(
      {
        worker: { pollIntervalMs: 100 },
        maintenance: {
          leaderCheckIntervalMs: 200,
          reapDeadAfter: 15_000,
          reapIntervalMs: 200,
          expireIntervalMs: 200,
          pruneIntervalMs: 200,
          completedRetention: '1h',
        },
      },
      [Live],
    );
    await waitFor(async () => {
      const [row] = (await sql.query(`SELECT state, failure_kind, interruptions FROM stampeded_jobs WHERE id = $1`, [orphan])).rows;
      return row.state === 'completed' && row;
    }, 'the reaped job to be rerun');
    await waitFor(
      async () => (await sql.query(`SELECT state FROM stampeded_jobs WHERE id = $1`, [stuck])).rows[0]?.state === 'discarded',
      'the stuck job to expire',
    );
    await waitFor(
      async () => (await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE queue = 'old'`)).rows[0].n === 0,
      'the old jobs to be pruned',
    );
    expect((await sql.query(`SELECT state, failure_kind, interruptions FROM stampeded_jobs WHERE id = $1`, [orphan])).rows[0]).toEqual({
      state: 'completed',
      failure_kind: 'worker_missing',
      interruptions: 1,
    });
    expect((await sql.query(`SELECT failure_kind FROM stampeded_jobs WHERE id = $1`, [stuck])).rows[0].failure_kind).toBe('timed_out');
    expect((await sql.query(`SELECT count(*)::int AS n FROM stampeded_workers WHERE id = $1`, [dead])).rows[0].n).toBe(0);
    expect(app.get(MaintenanceService).isLeader).toBe(true);
    expect(await sessionLocks()).toBe(0);
  });

  it('fires schedules, once an occurrence, across two apps', async () => {
    await boot({ worker: { pollIntervalMs: 100 }, maintenance: { enabled: false } }, [Tick]);
    await boot({ worker: { pollIntervalMs: 100 }, maintenance: { enabled: false } }, [Tick]);
    await waitFor(
      async () => (await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE task = 'tick' AND state = 'completed'`)).rows[0].n >= 3,
      'three ticks to run',
    );
    // Each occurrence enqueued one job, whichever app fired it.
    const { rows } = await sql.query(
      `SELECT scheduled_at, count(*)::int AS n FROM stampeded_jobs WHERE task = 'tick' GROUP BY scheduled_at HAVING count(*) > 1`,
    );
    expect(rows).toEqual([]);
  });

  it('serves the dashboard pages and API', async () => {
    const { id } = (await sql.query(`INSERT INTO stampeded_jobs (queue, task, args) VALUES ('shown', 'x', '{}') RETURNING id::text`)).rows[0];
    @Module({
      imports: [
        StampededModule.forRoot({ ...POOLED, connection: { url: pooled }, worker: { enabled: false }, maintenance: { leaderCheckIntervalMs: 200 } }),
        StampededDashboardModule.forRoot({ path: '/stampeded', auth: () => true, refreshSeconds: 0 }),
      ],
    })
    class PooledDashboardModule {}
    const app: INestApplication = await NestFactory.create(PooledDashboardModule, { logger: ['error', 'warn'] });
    apps.push(app);
    await app.listen(0, '127.0.0.1');
    const base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    await waitFor(() => app.get(MaintenanceService).isLeader, 'the lease to be taken');
    for (const path of ['', '/jobs', `/jobs/${id}`, '/errors', '/workers', '/schedules', '/health', '/api/queues', '/api/jobs?queue=shown']) {
      const response = await fetch(`${base}/stampeded${path}`);
      expect({ path, status: response.status }).toEqual({ path, status: 200 });
    }
    // The lease counts as a leader where no session lock is held.
    expect(await (await fetch(`${base}/stampeded/health`)).text()).toContain('a process leads maintenance');
  });

  function start(config: Pick<WorkerProcessConfig, 'stampeded' | 'hang'>): WorkerProcess {
    const process = WorkerProcess.start({ url: pooled, tasks: 'fleet', ...config, stampeded: { ...POOLED, ...config.stampeded } });
    fleet.push(process);
    return process;
  }

  it('hands leadership over when the leader is killed mid-job, and runs no job twice', async () => {
    const stampeded = {
      worker: { heartbeatIntervalMs: 200, pollIntervalMs: 100, concurrency: 4 },
      maintenance: { leaderCheckIntervalMs: 300, reapIntervalMs: 250, reapDeadAfter: 1500 },
    };
    const doomed = start({ hang: true, stampeded });
    await doomed.waitFor('elected');
    const holder = (await sql.query(`SELECT holder, term::int AS term, expires_at > now() AS live FROM stampeded_leader_leases`)).rows[0];
    expect(holder.live).toBe(true);
    const ids: string[] = (
      await sql.query(
        `INSERT INTO stampeded_jobs (queue, task, args) SELECT 'fleet', 'slow', jsonb_build_object('n', g) FROM generate_series(1, 12) g RETURNING id::text`,
      )
    ).rows.map((r) => r.id);
    await waitFor(() => doomed.count('started') === 4, 'the doomed process to start four jobs');
    const survivor = start({ stampeded });
    await survivor.ready();
    expect(survivor.has('elected')).toBe(false);

    await doomed.kill();
    await survivor.waitFor('elected');
    await waitFor(
      async () => (await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE id = ANY($1::uuid[]) AND state = 'completed'`, [ids])).rows[0].n === 12,
      'every job to complete',
    );
    // The survivor holds the next term; the dead leader's is gone.
    const lease = (await sql.query(`SELECT holder, term::int AS term FROM stampeded_leader_leases`)).rows[0];
    expect(lease.term).toBe(holder.term + 1);
    expect(lease.holder).not.toBe(holder.holder);
    // Each job completed once, by the survivor; the four the dead process held ran again after their reaping, and only those.
    const completedBy = survivor.events.filter((e) => e.event === 'completed').map((e) => e.id as string);
    expect(completedBy.sort()).toEqual([...ids].sort());
    const startedHere = survivor.events.filter((e) => e.event === 'started').map((e) => e.id as string);
    expect(new Set(startedHere).size).toBe(startedHere.length);
    const interrupted = doomed.events.filter((e) => e.event === 'started').map((e) => e.id as string);
    const { rows } = await sql.query(`SELECT id::text, attempt, interruptions FROM stampeded_jobs WHERE id = ANY($1::uuid[])`, [ids]);
    for (const row of rows) {
      expect({ id: row.id, attempt: row.attempt, interruptions: row.interruptions }).toEqual(
        interrupted.includes(row.id) ? { id: row.id, attempt: 2, interruptions: 1 } : { id: row.id, attempt: 1, interruptions: 0 },
      );
    }
    expect(await sessionLocks()).toBe(0);
  }, 180_000);
});

// What forRoot() refuses, before anything connects: runs with or without PgBouncer.
describe('pooler options', () => {
  it('refuses a pooler mode it does not know, naming what it accepts', () => {
    expect(() => StampededModule.forRoot({ pooler: 'session' as never })).toThrow(StampededConfigError);
    expect(() => StampededModule.forRoot({ pooler: 'session' as never })).toThrow(/pooler must be 'transaction' or \{ mode: 'transaction'/);
    expect(() => StampededModule.forRoot({ pooler: { mode: 'transaction', prepared: true } as never })).toThrow(/pooler must be/);
    expect(() => StampededModule.forRoot({ pooler: { mode: 'transaction', preparedStatements: 'yes' } as never })).toThrow(/pooler must be/);
    expect(() => StampededModule.forRoot({ pooler: { mode: 'transaction', preparedStatements: true } })).not.toThrow();
  });

  it('refuses a listenConnection without a pooler, and fleet events with nowhere to LISTEN', () => {
    expect(() => StampededModule.forRoot({ listenConnection: { url: 'postgres://direct/db' } })).toThrow(/listenConnection is the direct connection/);
    expect(() => StampededModule.forRoot({ pooler: 'transaction', events: 'fleet' })).toThrow(/Give listenConnection/);
    expect(() => StampededModule.forRoot({ pooler: 'transaction', events: 'fleet', listenConnection: { url: 'postgres://direct/db' } })).not.toThrow();
    expect(() => StampededModule.forRoot({ pooler: 'transaction' })).not.toThrow();
  });
});
