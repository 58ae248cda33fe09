import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { firstValueFrom, filter } from 'rxjs';
import {
  MaintenanceService,
  QueueService,
  StampededConfigError,
  StampededModule,
  Task,
  type MaintenanceEvent,
  type TaskHandler,
  migrate,
} from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { applyMigrations } from '@stampeded/nestjs/internal';
import { nestedPlans } from '../support/plans.js';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';

@Task('live', { queue: 'live' })
class Live implements TaskHandler {
  async handle() {}
}

/**
 * Maintenance that runs only when a test asks it to: no leader, no timers.
 * Without the insights rollup, which the pruner would otherwise wait for
 * (test/maintenance/insights.e2e-spec.ts tests the two together).
 */
const MANUAL = { enabled: false, insights: false } as const;

describe('maintenance', () => {
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
  });

  afterAll(async () => {
    await sql?.end();
    await db?.drop();
  });

  async function boot(options: Parameters<typeof bootApp>[1] = {}): Promise<INestApplicationContext> {
    const app = await bootApp(db.url, options);
    apps.push(app);
    return app;
  }

  describe('every terminal path ends a job the same way (stampeded_reap and stampeded_fail)', () => {
    const DEAD = '00000000-0000-7000-8000-00000000dead';
    const LIVE = '00000000-0000-7000-8000-0000000011fe';
    const run = async (text: string, params?: unknown[]) => (await sql.query(text, params)).rows;

    /** A schema at `version`, with one dead worker and one live one. */
    async function schemaAt(schema: string, version?: number): Promise<void> {
      await sql.query('BEGIN');
      await applyMigrations(run, { schema, upTo: version });
      await sql.query('COMMIT');
      await sql.query(`SET search_path = "${schema}"`);
      await sql.query(
        `INSERT INTO stampeded_workers (id, hostname, pid, last_heartbeat) VALUES ($1, 'gone', 1, now() - interval '1 hour'), ($2, 'here', 2, now())
         ON CONFLICT (id) DO UPDATE SET last_heartbeat = excluded.last_heartbeat`,
        [DEAD, LIVE],
      );
    }

    /** A job on its second interruption (the budget of one is spent), executing on `worker`. */
    async function executingJob(worker: string): Promise<string> {
      const { rows } = await sql.query(
        `INSERT INTO stampeded_jobs (queue, task, args, meta, tenant_id, priority, destination, state, attempt, max_attempts,
                                     interruptions, claimed_by, claimed_at, heartbeat_at, dead_letter_queue)
         VALUES ('work', 'crashy', '{"n": 1}', '{"nestjs": {"k": 1}, "activejob": {"x": 2}}', 't1', 3, 'api.example', 'executing', 2, 5,
                 1, $1, now(), now(), 'work-dead')
         RETURNING id::text`,
        [worker],
      );
      return rows[0].id;
    }

    const LETTER_COLUMNS = `queue, task, args, meta, tenant_id, priority, destination, source_queue, source_attempts, max_attempts,
                            dead_letter_queue, state, attempt`;
    const letterOf = async (id: string) => (await sql.query(`SELECT ${LETTER_COLUMNS} FROM stampeded_jobs WHERE source_id = $1`, [id])).rows;

    it('the reaper dead-letters a job whose interruption budget is spent, as stampeded_fail does (the seed did not)', async () => {
      // The seed's reaper: the job is discarded, and its dead letter never arrives.
      await schemaAt('seed_reaper', 1);
      const seedReaped = await executingJob(DEAD);
      await sql.query(`SELECT * FROM stampeded_reap(interval '1 minute')`);
      const [{ state: seedState }] = (await sql.query(`SELECT state FROM stampeded_jobs WHERE id = $1`, [seedReaped])).rows;
      expect(seedState).toBe('discarded');
      expect(await letterOf(seedReaped)).toHaveLength(0);

      // Every migration and the current functions, on the same schema.
      await schemaAt('seed_reaper');
      const reaped = await executingJob(DEAD);
      const failed = await executingJob(LIVE);
      await sql.query(`SELECT * FROM stampeded_reap(interval '1 minute')`);
      const [outcome] = (await sql.query(`SELECT * FROM stampeded_fail('work', $1, $2, 2::smallint, 'worker_exited', 'child died', NULL, 137)`, [failed, LIVE]))
        .rows;
      expect(outcome).toEqual({ was: 'executing', now_state: 'discarded', dead_lettered: true });

      const [job] = (await sql.query(`SELECT state, failure_kind, interruptions, finished_at, claimed_by, errors FROM stampeded_jobs WHERE id = $1`, [reaped]))
        .rows;
      expect(job).toMatchObject({ state: 'discarded', failure_kind: 'worker_missing', interruptions: 2, claimed_by: null });
      expect(job.finished_at).not.toBeNull();
      // The entry keeps the attempt's worker and start, as a failure's does (stampeded_push_error).
      expect(job.errors).toEqual([expect.objectContaining({ kind: 'worker_missing', attempt: 2, worker: DEAD, started_at: expect.any(String) })]);

      const [viaReaper] = await letterOf(reaped);
      const [viaFail] = await letterOf(failed);
      expect(viaReaper).toEqual(viaFail);
      expect(viaReaper).toMatchObject({
        queue: 'work-dead',
        source_queue: 'work',
        source_attempts: 2,
        max_attempts: 5,
        dead_letter_queue: null,
        state: 'available',
        args: { n: 1 },
        meta: { nestjs: { k: 1 }, activejob: { x: 2 } },
      });
      await sql.query(`RESET search_path`);
    });

    it('an interrupted job on its last attempt is discarded, not parked where no claim can reach it (the seed parked it)', async () => {
      const lastAttempt = async () =>
        (
          await sql.query(
            `INSERT INTO stampeded_jobs (queue, task, state, attempt, max_attempts, interruptions, max_interruptions, claimed_by, claimed_at, dead_letter_queue)
             VALUES ('work', 'crashy', 'executing', 3, 3, 0, 5, $1, now(), 'work-dead') RETURNING id::text`,
            [LIVE],
          )
        ).rows[0].id as string;
      const fail = (id: string) => sql.query(`SELECT * FROM stampeded_fail('work', $1, $2, 3::smallint, 'worker_exited', 'child died', NULL, 137)`, [id, LIVE]);

      await schemaAt('seed_last_attempt', 1);
      const parked = await lastAttempt();
      await fail(parked);
      expect((await sql.query(`SELECT state FROM stampeded_jobs WHERE id = $1`, [parked])).rows[0].state).toBe('retryable');
      // ...and no claim will ever take it: attempt has reached max_attempts.
      expect((await sql.query(`SELECT count(*)::int AS n FROM stampeded_claim('work', $1, 10)`, [LIVE])).rows[0].n).toBe(0);

      await schemaAt('seed_last_attempt');
      const ended = await lastAttempt();
      await fail(ended);
      expect((await sql.query(`SELECT state FROM stampeded_jobs WHERE id = $1`, [ended])).rows[0].state).toBe('discarded');
      expect(await letterOf(ended)).toHaveLength(1);
      await sql.query(`RESET search_path`);
    });

    it('reaps a job whose worker row is gone altogether', async () => {
      await schemaAt('orphans');
      const { rows } = await sql.query(
        `INSERT INTO stampeded_jobs (queue, task, state, attempt, claimed_by, claimed_at, heartbeat_at)
         VALUES ('work', 'orphan', 'executing', 1, uuidv7(), now() - interval '2 hours', now() - interval '2 hours'),
                ('work', 'fresh', 'executing', 1, uuidv7(), now(), now())
         RETURNING id::text, task`,
      );
      const reaped = (await sql.query(`SELECT id::text FROM stampeded_reap(interval '1 minute')`)).rows.map((r) => r.id);
      expect(reaped).toEqual([rows.find((r) => r.task === 'orphan')!.id]);
      await sql.query(`RESET search_path`);
    });
  });

  it('elects one leader among several processes, and a survivor takes over when the leader goes', async () => {
    const maintenance = { leaderCheckIntervalMs: 100, reapDeadAfter: 600 };
    const options = { stampeded: { maintenance, worker: { enabled: false, heartbeatIntervalMs: 200 } } };
    const [a, b, c] = [await boot(options), await boot(options), await boot(options)];
    const services = [a, b, c].map((app) => app.get(MaintenanceService));
    const leaderOf = () => services.filter((s) => s.isLeader);
    await waitFor(() => leaderOf().length === 1, 'one leader');
    // Still one, a few check intervals later: the others keep trying and keep failing.
    await new Promise((r) => setTimeout(r, 400));
    expect(leaderOf()).toHaveLength(1);

    const leader = leaderOf()[0];
    const leaderApp = [a, b, c][services.indexOf(leader)];
    const followers = services.filter((s) => s !== leader);
    const elected = Promise.race(followers.map((s) => firstValueFrom(s.events$.pipe(filter((e: MaintenanceEvent) => e.type === 'elected')))));
    const closedAt = Date.now();
    await leaderApp.close();
    apps.splice(apps.indexOf(leaderApp), 1);
    await elected;
    const handOverMs = Date.now() - closedAt;
    expect(followers.filter((s) => s.isLeader)).toHaveLength(1);
    process.stderr.write(`maintenance hand-over after a clean shutdown: ${handOverMs} ms\n`);
  });

  it('the leader runs every service on election and reaps dead workers, deleting their rows', async () => {
    const dead = (
      await sql.query(`INSERT INTO stampeded_workers (hostname, pid, last_heartbeat) VALUES ('gone', 1, now() - interval '1 hour') RETURNING id::text`)
    ).rows[0].id;
    const { rows } = await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, state, attempt, claimed_by, claimed_at) VALUES ('live', 'live', 'executing', 1, $1, now()) RETURNING id::text`,
      [dead],
    );
    const app = await boot({
      providers: [Live],
      stampeded: {
        maintenance: {
          leaderCheckIntervalMs: 100,
          reapDeadAfter: 15_000,
          // Short, so that runs recur: the first ones may finish before the test subscribes.
          reapIntervalMs: 200,
          expireIntervalMs: 200,
          pruneIntervalMs: 200,
          partitionCheckIntervalMs: 200,
          healthIntervalMs: 200,
        },
      },
    });
    const service = app.get(MaintenanceService);
    const ran = new Set<string>();
    const sub = service.events$.subscribe((e) => e.type === 'ran' && ran.add(e.task));
    await waitFor(() => ['reaper', 'expirer', 'pruner', 'partitions', 'health'].every((t) => ran.has(t)), 'every service to run once');
    sub.unsubscribe();
    // Given back, then run by this app's worker, with the interruption on record.
    const job = await waitFor(async () => {
      const [row] = (await sql.query(`SELECT state, failure_kind, interruptions FROM stampeded_jobs WHERE id = $1`, [rows[0].id])).rows;
      return row.state === 'completed' && row;
    }, 'the reaped job to be rerun');
    expect(job).toEqual({ state: 'completed', failure_kind: 'worker_missing', interruptions: 1 });
    expect((await sql.query(`SELECT count(*)::int AS n FROM stampeded_workers WHERE id = $1`, [dead])).rows[0].n).toBe(0);
    expect(service.lastHealth?.leader).toBe(true);
  });

  it('expires a job whose worker is alive but stuck', async () => {
    const app = await boot({ stampeded: { maintenance: MANUAL, worker: { enabled: false } } });
    const { rows } = await sql.query(
      `WITH w AS (INSERT INTO stampeded_workers (hostname, pid) VALUES ('stuck', 1) RETURNING id)
       INSERT INTO stampeded_jobs (queue, task, state, attempt, expire_seconds, claimed_by, claimed_at, heartbeat_at)
       SELECT 'stuck', 'x', 'executing', 1, 1, w.id, now() - interval '1 minute', now() - interval '1 minute' FROM w
       RETURNING id::text`,
    );
    const result = await app.get(MaintenanceService).run('expirer');
    expect(result).toMatchObject({ expired: 1 });
    const [job] = (await sql.query(`SELECT state, failure_kind FROM stampeded_jobs WHERE id = $1`, [rows[0].id])).rows;
    expect(job).toEqual({ state: 'retryable', failure_kind: 'timed_out' });
  });

  it('prunes 100,000 finished jobs in batches while workers keep claiming, and keeps what retention keeps', async () => {
    await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, state, finished_at, inserted_at)
       SELECT 'old', 'x', CASE WHEN g % 10 = 0 THEN 'discarded' ELSE 'completed' END,
              now() - interval '10 days', now() - interval '10 days'
         FROM generate_series(1, 100000) g`,
    );
    await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, state, finished_at)
       SELECT 'old', 'recent', 'completed', now() - interval '10 minutes' FROM generate_series(1, 500)`,
    );
    const app = await boot({
      providers: [Live],
      stampeded: {
        maintenance: { ...MANUAL, completedRetention: '1h', failedRetention: '7d', pruneMaxDurationMs: 120_000 },
        worker: { concurrency: 4, pollIntervalMs: 50 },
      },
    });
    const queue = app.get(QueueService);
    const maintenance = app.get(MaintenanceService);

    let pruning = true;
    const enqueuer = (async () => {
      let n = 0;
      while (pruning) {
        await queue.enqueueMany(Array.from({ length: 20 }, () => ({ task: 'live', args: { n: n++ } })));
        await new Promise((r) => setTimeout(r, 20));
      }
      return n;
    })();
    const startedAt = new Date();
    const result = await maintenance.run('pruner');
    const endedAt = new Date();
    pruning = false;
    const enqueued = await enqueuer;

    expect(result).toMatchObject({ jobsDeleted: 100_000, backlogLeft: false });
    expect(result.batches).toBeGreaterThanOrEqual(10);
    const [{ old, recent }] = (
      await sql.query(
        `SELECT count(*) FILTER (WHERE task = 'x')::int AS old, count(*) FILTER (WHERE task = 'recent')::int AS recent FROM stampeded_jobs WHERE queue = 'old'`,
      )
    ).rows;
    expect({ old, recent }).toEqual({ old: 0, recent: 500 });
    // Workers completed jobs while the pruner ran, not only after it.
    const [{ during }] = (
      await sql.query(`SELECT count(*)::int AS during FROM stampeded_jobs WHERE queue = 'live' AND finished_at BETWEEN $1 AND $2`, [startedAt, endedAt])
    ).rows;
    expect(during).toBeGreaterThan(0);
    await waitFor(
      async () =>
        (await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE queue = 'live' AND args ? 'n' AND state = 'completed'`)).rows[0].n === enqueued,
      'every live job to complete',
    );
    // The counters followed the deletes.
    const counts = (await sql.query(`SELECT state, n::int FROM stampeded_queue_counts_total WHERE queue = 'old' AND n <> 0`)).rows;
    expect(counts).toEqual([{ state: 'completed', n: 500 }]);
    process.stderr.write(
      `pruned 100,000 jobs in ${endedAt.getTime() - startedAt.getTime()} ms (${result.batches} batches) while workers completed ${during} jobs\n`,
    );
  });

  it('reads only what is past retention: jobs completed a minute ago cost a prune a few pages, however many', async () => {
    await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, state, finished_at)
       SELECT 'fresh', 'x', 'completed', now() - interval '1 minute' FROM generate_series(1, 20000)`,
    );
    // What earlier tests deleted leaves no dead index entries in the range the prune reads.
    await sql.query('VACUUM ANALYZE stampeded_jobs');
    // The plan inside the function, as auto_explain prints it.
    const plans = await nestedPlans(
      sql,
      async () => {
        const [{ deleted }] = (await sql.query(`SELECT stampeded_prune(interval '1 hour', 10000, interval '7 days') AS deleted`)).rows;
        expect(deleted).toBe(0);
      },
      { analyze: true, json: true },
    );
    const prune = plans.map((p) => JSON.parse(p.slice(p.indexOf('{')))).find((p) => String(p['Query Text']).includes('doomed'));
    expect(prune).toBeDefined();
    const pages = prune.Plan['Shared Hit Blocks'] + prune.Plan['Shared Read Blocks'];
    // Without a bound on finished_at the prune read every retained row: about 600 pages here.
    expect(pages).toBeLessThan(100);
    await sql.query(`DELETE FROM stampeded_jobs WHERE queue = 'fresh'`);
  });

  it('bounds one prune tick by pruneMaxDurationMs and leaves the rest for the next tick', async () => {
    await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, state, finished_at)
       SELECT 'bounded', 'x', 'completed', now() - interval '1 day' FROM generate_series(1, 30)`,
    );
    const app = await boot({
      stampeded: { maintenance: { ...MANUAL, pruneBatchSize: 10, pruneMaxDurationMs: 1 }, worker: { enabled: false } },
    });
    const first = await app.get(MaintenanceService).run('pruner');
    expect(first).toMatchObject({ jobsDeleted: 10, batches: 1, backlogLeft: true });
  });

  describe('workflows', () => {
    /** Each workflow's rows: itself, its names, its edges, and its jobs still in stampeded_jobs. */
    const rowsOf = async (ids: Record<string, string>) => {
      const { rows } = await sql.query(
        `SELECT w.id::text AS id,
                (SELECT count(*) FROM stampeded_workflows x WHERE x.id = w.id)::int AS workflows,
                (SELECT count(*) FROM stampeded_workflow_jobs m WHERE m.workflow_id = w.id)::int AS names,
                (SELECT count(*) FROM stampeded_workflow_edges e WHERE e.workflow_id = w.id)::int AS edges,
                (SELECT count(*) FROM stampeded_workflow_jobs m JOIN stampeded_jobs j ON j.queue = m.job_queue AND j.id = m.job_id
                  WHERE m.workflow_id = w.id)::int AS jobs
           FROM unnest($1::uuid[]) AS w(id)`,
        [Object.values(ids)],
      );
      const byId = new Map(rows.map(({ id, ...counts }) => [id, counts]));
      return Object.fromEntries(Object.entries(ids).map(([name, id]) => [name, byId.get(id)]));
    };
    /** Finishes jobs as an outcome would, `ago` in the past. */
    const finish = (ids: string[], ago: string, state = 'completed') =>
      sql.query(
        `UPDATE stampeded_jobs SET state = $2, deps_pending = NULL, finished_at = now() - $3::interval, result = '{"v": 1}' WHERE id = ANY($1::uuid[])`,
        [ids, state, ago],
      );
    const twoSteps = (queue: QueueService, name: string) =>
      queue.enqueueWorkflow({
        name,
        jobs: [
          { name: 'a', task: 'wf-step', options: { queue: 'wf-prune' } },
          { name: 'b', task: 'wf-step', options: { queue: 'wf-prune' }, dependsOn: ['a'] },
        ],
      });

    it("prunes a workflow once none of its jobs is left, and keeps a job's result while a job that waits for it has not finished", async () => {
      const app = await boot({ stampeded: { maintenance: { ...MANUAL, completedRetention: '1h', failedRetention: '7d' }, worker: { enabled: false } } });
      const queue = app.get(QueueService);
      const maintenance = app.get(MaintenanceService);
      const done = await twoSteps(queue, 'done');
      const waiting = await twoSteps(queue, 'waiting');
      const recent = await twoSteps(queue, 'recent');
      const failed = await twoSteps(queue, 'failed');
      const removed = await queue.enqueueWorkflow({ name: 'removed', jobs: [{ name: 'x', task: 'wf-step', options: { queue: 'wf-prune' } }] });
      await finish([done.jobs.a, done.jobs.b, waiting.jobs.a, recent.jobs.a], '2 hours');
      // waiting's b was released by a and has not run yet.
      await sql.query(`UPDATE stampeded_jobs SET state = 'available', deps_pending = NULL WHERE id = $1`, [waiting.jobs.b]);
      await finish([recent.jobs.b], '10 minutes');
      // Discarded two hours ago: inside the failed retention.
      await finish([failed.jobs.a, failed.jobs.b], '2 hours', 'discarded');
      // What removeOnComplete (or an operator's DELETE) leaves: names with no job.
      await sql.query(`DELETE FROM stampeded_jobs WHERE id = $1`, [removed.jobs.x]);
      const ids = { done: done.id, waiting: waiting.id, recent: recent.id, failed: failed.id, removed: removed.id };

      const full = { workflows: 1, names: 2, edges: 1, jobs: 2 };
      const gone = { workflows: 0, names: 0, edges: 0, jobs: 0 };
      expect(await rowsOf(ids)).toEqual({ done: full, waiting: full, recent: full, failed: full, removed: { workflows: 1, names: 1, edges: 0, jobs: 0 } });

      const result = await maintenance.run('pruner');
      expect(result).toMatchObject({ workflowsDeleted: 2 });
      expect(await rowsOf(ids)).toEqual({
        done: gone,
        // a is past its retention, but b, which reads a's result when it runs, has not run.
        waiting: full,
        // a went (what waited for it has finished); b is inside its retention, and the workflow with it.
        recent: { ...full, jobs: 1 },
        failed: full,
        removed: gone,
      });
      expect((await sql.query(`SELECT result FROM stampeded_jobs WHERE id = $1`, [waiting.jobs.a])).rows).toEqual([{ result: { v: 1 } }]);

      // Once b has run and is past its own retention, both go, and the workflow with them.
      await finish([waiting.jobs.b], '2 hours');
      expect(await maintenance.run('pruner')).toMatchObject({ workflowsDeleted: 1 });
      expect((await rowsOf({ waiting: waiting.id })).waiting).toEqual(gone);
      expect((await rowsOf({ recent: recent.id })).recent).toEqual({ ...full, jobs: 1 });
    });

    it('resumes where the last tick stopped: live workflows ahead do not keep the pruner from an empty one behind them', async () => {
      // One workflow a pass (its two jobs fill pruneBatchSize) and one pass a tick.
      const app = await boot({ stampeded: { maintenance: { ...MANUAL, pruneBatchSize: 2, pruneMaxDurationMs: 1 }, worker: { enabled: false } } });
      const queue = app.get(QueueService);
      const maintenance = app.get(MaintenanceService);
      for (const name of ['live-1', 'live-2', 'live-3']) await twoSteps(queue, name);
      const empty = await twoSteps(queue, 'empty');
      await sql.query(`DELETE FROM stampeded_jobs WHERE id = ANY($1::uuid[])`, [[empty.jobs.a, empty.jobs.b]]);
      const [{ total }] = (await sql.query(`SELECT count(*)::int AS total FROM stampeded_workflows`)).rows;
      expect(total).toBeGreaterThan(4);

      let deleted = 0;
      for (let tick = 0; tick < total; tick++) deleted += ((await maintenance.run('pruner')) as { workflowsDeleted: number }).workflowsDeleted;
      expect(deleted).toBe(1);
      const left = (await sql.query(`SELECT name FROM stampeded_workflows WHERE name LIKE 'live-%' OR name = 'empty' ORDER BY name`)).rows;
      expect(left.map((r) => r.name)).toEqual(['live-1', 'live-2', 'live-3']);
    });
  });

  it('repairs a partition that lost its notify and counter triggers, and recounts it', async () => {
    const app = await boot({ queues: [{ name: 'repairs' }], stampeded: { maintenance: MANUAL, worker: { enabled: false } } });
    const service = app.get(MaintenanceService);
    await sql.query(`DROP TRIGGER stampeded_notify_insert_trg ON stampeded_jobs_repairs`);
    await sql.query(`DROP TRIGGER stampeded_count_ins_trg ON stampeded_jobs_repairs`);
    await sql.query(`DROP TRIGGER stampeded_count_del_trg ON stampeded_jobs_repairs`);
    // Rows that arrive while the counter is missing go uncounted.
    await sql.query(`INSERT INTO stampeded_jobs_repairs (queue, task) SELECT 'repairs', 'x' FROM generate_series(1, 7)`);

    expect((await service.health()).brokenPartitions).toEqual(['stampeded_jobs_repairs']);
    const result = await service.run('partitions');
    expect(result.repaired).toEqual({
      stampeded_jobs_repairs: ['stampeded_notify_insert_trg', 'stampeded_count_ins_trg', 'stampeded_count_del_trg'],
    });
    expect((await service.health()).brokenPartitions).toEqual([]);
    const counted = async () =>
      (await sql.query(`SELECT coalesce(sum(n), 0)::int AS n FROM stampeded_queue_counts WHERE queue = 'repairs' AND state = 'available'`)).rows[0].n;
    expect(await counted()).toBe(7);
    await sql.query(`INSERT INTO stampeded_jobs_repairs (queue, task) VALUES ('repairs', 'y')`);
    expect(await counted()).toBe(8);
    expect(await service.run('partitions')).toMatchObject({ repaired: {} });
  });

  it('recounts a queue on demand', async () => {
    const app = await boot({ stampeded: { maintenance: MANUAL, worker: { enabled: false } } });
    await app.get(QueueService).enqueueMany([
      { task: 't', args: {}, options: { queue: 'recount' } },
      { task: 't', args: {}, options: { queue: 'recount' } },
    ]);
    await sql.query(`UPDATE stampeded_queue_counts SET n = 999 WHERE queue = 'recount'`);
    await app.get(MaintenanceService).recountQueue('recount');
    const rows = (await sql.query(`SELECT state, n::int FROM stampeded_queue_counts_total WHERE queue = 'recount'`)).rows;
    expect(rows).toEqual([{ state: 'available', n: 2 }]);
  });

  it('reports health as a structured snapshot, and rebuilds sparse indexes concurrently when enabled', async () => {
    const app = await boot({ queues: [{ name: 'sparse' }], stampeded: { maintenance: { ...MANUAL, reindex: true }, worker: { enabled: false } } });
    const service = app.get(MaintenanceService);
    // 60,000 rows, then all but 50 gone: the primary key keeps its pages.
    await sql.query(
      `INSERT INTO stampeded_jobs_sparse (queue, task, state, finished_at) SELECT 'sparse', 'x', 'completed', now() FROM generate_series(1, 60000)`,
    );
    await sql.query(`DELETE FROM stampeded_jobs_sparse WHERE id NOT IN (SELECT id FROM stampeded_jobs_sparse LIMIT 50)`);
    await sql.query(`VACUUM ANALYZE stampeded_jobs_sparse`);

    const before = await service.health();
    expect(before.vacuum.map((v) => v.relname)).toEqual(expect.arrayContaining(['stampeded_jobs_default', 'stampeded_jobs_sparse']));
    expect(before.partitions.map((p) => p.queue)).toEqual(expect.arrayContaining(['sparse']));
    expect(before.sparseIndexes).toContain('stampeded_jobs_sparse_pkey');
    const pagesBefore = before.indexes.find((i) => i.indexName === 'stampeded_jobs_sparse_pkey')!.pages;

    const result = await service.run('reindexer');
    expect(result.rebuilt).toContain('stampeded_jobs_sparse_pkey');
    expect(result.failed).toEqual([]);
    const after = await service.health();
    expect(after.sparseIndexes).not.toContain('stampeded_jobs_sparse_pkey');
    expect(after.indexes.find((i) => i.indexName === 'stampeded_jobs_sparse_pkey')!.pages).toBeLessThan(pagesBefore);
    expect(after.indexes.some((i) => /_ccnew|_ccold/.test(i.indexName))).toBe(false);
  });

  it('warns of a table autovacuum does not reach, not of one that merely passed its threshold since the last vacuum', async () => {
    const app = await boot({ queues: [{ name: 'unvacuumed' }, { name: 'due' }], stampeded: { maintenance: MANUAL, worker: { enabled: false } } });
    const service = app.get(MaintenanceService);
    // Dead tuples far past both partitions' thresholds; autovacuum off for one of them.
    await sql.query(`ALTER TABLE stampeded_jobs_unvacuumed SET (autovacuum_enabled = false)`);
    for (const queue of ['unvacuumed', 'due']) {
      await sql.query(`INSERT INTO stampeded_jobs_${queue} (queue, task) SELECT '${queue}', 'x' FROM generate_series(1, 2000)`);
      await sql.query(`DELETE FROM stampeded_jobs_${queue}`);
    }
    await sql.query(`SELECT pg_stat_force_next_flush()`);
    const flagged = (h: Awaited<ReturnType<MaintenanceService['health']>>) =>
      h.needsVacuum.includes('stampeded_jobs_unvacuumed') && h.needsVacuum.includes('stampeded_jobs_due');
    await waitFor(async () => flagged(await service.health()), 'the dead tuples in the statistics');

    // The table autovacuum never visits is named at once; the one merely due
    // is autovacuum's next round's work, and is not. (Autovacuum may visit
    // the due one meanwhile: then it is clean, and still not named.)
    const first = await service.run('health');
    expect(first.vacuumBehind).toContain('stampeded_jobs_unvacuumed');
    expect(first.vacuumBehind).not.toContain('stampeded_jobs_due');
    const health = await service.health();
    expect(health.vacuum.find((v) => v.relname === 'stampeded_jobs_unvacuumed')).toMatchObject({ standing: 'off', autovacuumEnabled: false });
    expect(['due', 'clean']).toContain(health.vacuum.find((v) => v.relname === 'stampeded_jobs_due')!.standing);
    // Vacuumed: no longer flagged, nor named.
    await sql.query(`VACUUM stampeded_jobs_unvacuumed`);
    await sql.query(`SELECT pg_stat_force_next_flush()`);
    await waitFor(async () => !(await service.health()).needsVacuum.includes('stampeded_jobs_unvacuumed'), 'the vacuum in the statistics');
    expect((await service.run('health')).vacuumBehind).not.toContain('stampeded_jobs_unvacuumed');
  });

  it('refuses bad maintenance options at forRoot(), naming the option', () => {
    expect(() => StampededModule.forRoot({ maintenance: { reapDeadAfter: 1000 } })).toThrow(
      /maintenance\.reapDeadAfter is 1000 ms, less than three worker heartbeats/,
    );
    expect(() => StampededModule.forRoot({ maintenance: { completedRetention: 'a week' } })).toThrow(
      /maintenance\.completedRetention must be milliseconds or a duration such as '90s'/,
    );
    expect(() => StampededModule.forRoot({ maintenance: { pruneBatchSize: 0 } })).toThrow(/maintenance\.pruneBatchSize must be a whole number of 1 or more/);
    expect(() => StampededModule.forRoot({ maintenance: { reapEvery: 5 } as never })).toThrow(StampededConfigError);
    expect(() => StampededModule.forRoot({ schedules: { misfireGrace: -1 } })).toThrow(/schedules\.misfireGrace must be a duration of at least 1 ms/);
  });
});
