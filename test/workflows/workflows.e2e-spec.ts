import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { DataSource } from 'typeorm';
import { InvalidJobError, QueueService, migrate } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { jobSql } from '../support/job-sql.js';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';
import { WorkerProcess } from '../support/worker-process.js';

// Workflows and batches run by a fleet of worker processes
// (test/fixtures/worker-process/workflows.tasks.mjs), enqueued from an app
// whose own worker is off. Each job's result says what it saw of the jobs it
// waited for when it started.
/** The fleet's queue: the app that enqueues does not declare these tasks. */
const F = { queue: 'flows' };

describe('workflows', () => {
  const handle = {} as { db: TestDatabase; sql: pg.Client };
  const sql = () => handle.sql;
  const workers: WorkerProcess[] = [];
  let api: INestApplicationContext;
  let queue: QueueService;

  const jobsOf = async (workflowId: string) =>
    (
      await sql().query<{ name: string; state: string; result: any; last_error: string | null; failure_kind: string | null }>(
        `SELECT m.name, j.state, j.result, j.last_error, j.failure_kind
           FROM stampeded_workflow_jobs m JOIN stampeded_jobs j ON j.queue = m.job_queue AND j.id = m.job_id
          WHERE m.workflow_id = $1 ORDER BY m.name`,
        [workflowId],
      )
    ).rows;
  const byName = async (workflowId: string) => Object.fromEntries((await jobsOf(workflowId)).map((j) => [j.name, j]));
  /** Every job of the workflow once all have finished; the states of those that did not, at the deadline. */
  const finished = async (workflowId: string) => {
    let seen = '';
    return waitFor(
      async () => {
        const jobs = await jobsOf(workflowId);
        if (jobs.every((j) => ['completed', 'discarded', 'cancelled'].includes(j.state))) return jobs;
        seen = jobs.map((j) => `${j.name}: ${j.state}`).join(', ');
        return null;
      },
      `workflow ${workflowId} to finish`,
      30_000,
    ).catch((err: Error) => {
      throw new Error(`${err.message}; its jobs: ${seen}`);
    });
  };
  /** The counters' totals beside a count of the rows: they must agree for every queue and state. */
  const countersAgree = async () => {
    const { rows } = await sql().query(`
      SELECT coalesce(c.queue, r.queue) AS queue, coalesce(c.state, r.state) AS state, coalesce(c.n, 0)::int AS counted, coalesce(r.n, 0)::int AS rows
        FROM (SELECT queue, state, n FROM stampeded_queue_counts_total WHERE n <> 0) c
        FULL JOIN (SELECT queue, state, count(*) AS n FROM stampeded_jobs GROUP BY 1, 2) r ON r.queue = c.queue AND r.state = c.state`);
    return rows.filter((r) => r.counted !== r.rows);
  };

  beforeAll(async () => {
    handle.db = await testDatabase();
    await migrate(handle.db.url);
    handle.sql = await sqlClient(handle.db.url);
    await handle.sql.query(`CREATE TABLE flow_callback_runs (job_id uuid NOT NULL, pid integer NOT NULL, counts jsonb NOT NULL)`);
    api = await bootApp(handle.db.url, { via: 'typeorm', stampeded: { worker: { enabled: false } } });
    queue = api.get(QueueService);
    await startFleet(3);
  });

  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await api?.close();
    await handle.sql?.end();
    await handle.db?.drop();
  });

  async function startFleet(n: number) {
    for (let i = 0; i < n; i++) {
      workers.push(
        WorkerProcess.start({
          url: handle.db.url,
          tasks: 'workflows',
          stampeded: { worker: { pollIntervalMs: 100, heartbeatIntervalMs: 500, concurrency: 8 } },
        }),
      );
    }
    await Promise.all(workers.map((w) => w.ready()));
  }

  describe('refused before anything is written', () => {
    const nothingWritten = async () => {
      const { rows } = await sql().query(
        `SELECT (SELECT count(*) FROM stampeded_jobs)::int AS jobs, (SELECT count(*) FROM stampeded_workflows)::int AS workflows,
                (SELECT count(*) FROM stampeded_workflow_edges)::int AS edges`,
      );
      expect(rows[0]).toEqual({ jobs: 0, workflows: 0, edges: 0 });
    };

    it('a cycle, named', async () => {
      const call = queue.enqueueWorkflow({
        name: 'cyclic',
        jobs: [
          { name: 'a', task: 'flow-step', options: F, dependsOn: ['c'] },
          { name: 'b', task: 'flow-step', options: F, dependsOn: ['a'] },
          { name: 'c', task: 'flow-step', options: F, dependsOn: ['b'] },
          { name: 'd', task: 'flow-step', options: F, dependsOn: ['c'] },
        ],
      });
      await expect(call).rejects.toThrow(InvalidJobError);
      await expect(call).rejects.toThrow(/cycle \("[abc]" -> "[abc]" -> "[abc]" -> "[abc]"\)/);
      await nothingWritten();
    });

    it('a job that waits for itself', async () => {
      await expect(queue.enqueueWorkflow({ name: 'self', jobs: [{ name: 'a', task: 'flow-step', options: F, dependsOn: ['a'] }] })).rejects.toThrow(
        /cycle \("a" -> "a"\)/,
      );
      await nothingWritten();
    });

    it('an unknown dependency, a repeated name, a repeated dependency', async () => {
      await expect(
        queue.enqueueWorkflow({
          name: 'x',
          jobs: [
            { name: 'a', task: 'flow-step', options: F },
            { name: 'b', task: 'flow-step', dependsOn: ['nope'] },
          ],
        }),
      ).rejects.toThrow(/job "b" depends on "nope", which is not a job of this workflow/);
      await expect(
        queue.enqueueWorkflow({
          name: 'x',
          jobs: [
            { name: 'a', task: 'flow-step', options: F },
            { name: 'a', task: 'flow-step' },
          ],
        }),
      ).rejects.toThrow(/jobs #0 and #1 are both named "a"/);
      await expect(
        queue.enqueueWorkflow({
          name: 'x',
          jobs: [
            { name: 'a', task: 'flow-step', options: F },
            { name: 'b', task: 'flow-step', dependsOn: ['a', { name: 'a' }] },
          ],
        }),
      ).rejects.toThrow(/names "a" twice/);
      await expect(queue.enqueueWorkflow({ name: 'x', jobs: [] })).rejects.toThrow(/at least one job/);
      await expect(queue.enqueueWorkflow({ name: 'x', jobs: [{ name: 'a', task: 'flow-step', options: { dedup: { scope: 's' } } as never }] })).rejects.toThrow(
        /takes no dedup/,
      );
      await nothingWritten();
    });
  });

  it('a waiting job is pending, counted, and invisible to every claim; a rollback leaves nothing', async () => {
    const dataSource = api.get(DataSource);
    await expect(
      dataSource.transaction(async (manager) => {
        await queue.enqueueWorkflow({ name: 'rolled-back', jobs: [{ name: 'a', task: 'flow-step', options: F }] }, { manager });
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect((await sql().query(`SELECT count(*)::int AS n FROM stampeded_workflows`)).rows[0].n).toBe(0);

    const wf = await queue.enqueueWorkflow({
      name: 'claims',
      jobs: [
        { name: 'first', task: 'flow-step', options: { queue: 'flows-claims' } },
        { name: 'second', task: 'flow-step', dependsOn: ['first'], options: { queue: 'flows-claims' } },
      ],
    });
    expect(await queue.counts('flows-claims')).toMatchObject({ available: 1, pending: 1 });
    const worker = (await sql().query(`INSERT INTO stampeded_workers (hostname, pid) VALUES ('t', 1) RETURNING id::text`)).rows[0].id;
    // The seed's claim, as another runtime calls it, and this runtime's.
    const seedClaim = await sql().query(`SELECT id::text FROM stampeded_claim('flows-claims', $1, 10)`, [worker]);
    expect(seedClaim.rows.map((r) => r.id)).toEqual([wf.jobs.first]);
    const batchClaim = await sql().query(`SELECT id::text FROM stampeded_claim_batch('flows-claims', $1, 10)`, [worker]);
    expect(batchClaim.rows).toEqual([]);
    expect(await countersAgree()).toEqual([]);
    await queue.cancelWorkflow(wf.id);
  });

  it('runs a diamond and a fan-out/fan-in across processes: each job after all it waits for, counters exact', async () => {
    const leaves = Array.from({ length: 40 }, (_, i) => ({
      name: `leaf-${i}`,
      task: 'flow-step',
      options: F,
      args: { value: i, sleepMs: i % 5 },
      dependsOn: ['b', 'c'],
    }));
    const wf = await queue.enqueueWorkflow({
      name: 'diamond',
      jobs: [
        { name: 'a', task: 'flow-step', options: F, args: { value: 1 } },
        { name: 'b', task: 'flow-step', options: F, args: { value: 2, sleepMs: 50 }, dependsOn: ['a'] },
        { name: 'c', task: 'flow-step', options: F, args: { value: 3 }, dependsOn: ['a'] },
        ...leaves,
        { name: 'z', task: 'flow-sum', options: F, dependsOn: leaves.map((l) => l.name) },
      ],
    });
    const jobs = await finished(wf.id);
    expect(jobs.every((j) => j.state === 'completed')).toBe(true);
    for (const job of jobs) {
      // What it waited for had all completed when it started.
      for (const [name, state] of job.result.saw) expect([job.name, name, state]).toEqual([job.name, name, 'completed']);
    }
    const jobsByName = Object.fromEntries(jobs.map((j) => [j.name, j]));
    expect(jobsByName.b.result.saw).toEqual([['a', 'completed']]);
    expect(jobsByName['leaf-7'].result.saw).toEqual([
      ['b', 'completed'],
      ['c', 'completed'],
    ]);
    // The fan-in read every leaf's result.
    expect(jobsByName.z.result.total).toBe((39 * 40) / 2);
    expect(jobsByName.z.result.children).toHaveLength(40);
    expect(await countersAgree()).toEqual([]);
    const summary = await queue.getWorkflow(wf.id);
    expect(summary).toMatchObject({ name: 'diamond', kind: 'workflow', state: 'finished', counts: { completed: 44 } });
  });

  it('a failed dependency cancels what waits for it, with the reason, unless the edge ignores failure; the cancel cascades', async () => {
    const wf = await queue.enqueueWorkflow({
      name: 'failing',
      jobs: [
        { name: 'doomed', task: 'flow-doomed', options: F },
        { name: 'ok', task: 'flow-step', options: F },
        { name: 'strict', task: 'flow-step', options: F, dependsOn: ['doomed', 'ok'] },
        { name: 'after-strict', task: 'flow-step', options: F, dependsOn: ['strict'] },
        { name: 'tolerant', task: 'flow-step', options: F, dependsOn: [{ name: 'doomed', ignoreFailure: true }, 'ok'] },
      ],
    });
    await finished(wf.id);
    const jobs = await byName(wf.id);
    expect(jobs.doomed.state).toBe('discarded');
    expect(jobs.ok.state).toBe('completed');
    expect(jobs.strict).toMatchObject({ state: 'cancelled', failure_kind: 'cancelled' });
    expect(jobs.strict.last_error).toMatch(/^dependency doomed \([0-9a-f-]{36}\) was discarded$/);
    expect(jobs['after-strict']).toMatchObject({ state: 'cancelled', failure_kind: 'cancelled' });
    expect(jobs['after-strict'].last_error).toMatch(/^dependency strict \([0-9a-f-]{36}\) was cancelled$/);
    expect(jobs.tolerant.state).toBe('completed');
    expect(jobs.tolerant.result.saw).toEqual([
      ['doomed', 'discarded'],
      ['ok', 'completed'],
    ]);
    const errors = (await sql().query(`SELECT errors FROM stampeded_jobs WHERE id = $1`, [wf.jobs.strict])).rows[0].errors;
    expect(errors).toEqual([expect.objectContaining({ kind: 'cancelled', message: expect.stringMatching(/^dependency doomed/) })]);
    expect(await countersAgree()).toEqual([]);
  });

  it('a job the reaper discards, or one cancelled by hand, settles what waits for it', async () => {
    const wf = await queue.enqueueWorkflow({
      name: 'reaped',
      jobs: [
        { name: 'lost', task: 'flow-step', options: { queue: 'flows-reap', maxInterruptions: 0 } },
        // Due in an hour, so that the one claim below takes `lost`: two jobs due at once are claimed in either order.
        { name: 'cancelled', task: 'flow-step', options: { queue: 'flows-reap', delayMs: 3_600_000 } },
        { name: 'after-lost', task: 'flow-step', dependsOn: ['lost'], options: { queue: 'flows-reap' } },
        {
          name: 'after-both',
          task: 'flow-step',
          dependsOn: [
            { name: 'lost', ignoreFailure: true },
            { name: 'cancelled', ignoreFailure: true },
          ],
          options: { queue: 'flows-reap' },
        },
      ],
    });
    const js = jobSql(sql);
    const worker = await js.worker();
    await js.claim('flows-reap', worker, 1);
    await sql().query(`UPDATE stampeded_workers SET last_heartbeat = now() - interval '1 hour' WHERE id = $1`, [worker]);
    expect((await sql().query(`SELECT id::text FROM stampeded_reap(interval '1 minute')`)).rows).toEqual([{ id: wf.jobs.lost }]);
    let jobs = await byName(wf.id);
    expect(jobs.lost.state).toBe('discarded');
    expect(jobs['after-lost']).toMatchObject({ state: 'cancelled', last_error: `dependency lost (${wf.jobs.lost}) was discarded` });
    expect(jobs['after-both'].state).toBe('pending');
    await queue.cancel(wf.jobs.cancelled);
    jobs = await byName(wf.id);
    expect(jobs['after-both'].state).toBe('available');
    expect(await countersAgree()).toEqual([]);
  });

  it('enqueueFlow: a parent runs after its children and reads their results', async () => {
    const flow = await queue.enqueueFlow({
      name: 'report',
      task: 'flow-sum',
      options: F,
      children: [
        { name: 'part-1', task: 'flow-step', options: F, args: { value: 10 } },
        { name: 'part-2', task: 'flow-sum', options: F, children: [{ name: 'part-2a', task: 'flow-step', options: F, args: { value: 5 } }] },
        { task: 'flow-step', options: F, args: { value: 7 } },
      ],
    });
    await finished(flow.id);
    const jobs = await byName(flow.id);
    expect(jobs['part-2'].result).toMatchObject({ total: 5, children: ['part-2a'] });
    // part-2's own result has no `value`: the root sums 10 + 0 + 7.
    expect(jobs.report.result).toEqual({
      total: 17,
      children: ['0.2', 'part-1', 'part-2'],
      saw: [
        ['0.2', 'completed'],
        ['part-1', 'completed'],
        ['part-2', 'completed'],
      ],
    });
    expect(Object.keys(flow.jobs).sort()).toEqual(['0.2', 'part-1', 'part-2', 'part-2a', 'report']);
  });

  it('a task run in a child process (isolation: process) reads its dependencies, their results and the batch counts', async () => {
    const wf = await queue.enqueueWorkflow({
      name: 'isolated',
      jobs: [
        { name: 'one', task: 'flow-step', options: F, args: { value: 4 } },
        { name: 'two', task: 'flow-doomed', options: F },
        { name: 'parent', task: 'flow-isolated', options: F, args: { mode: 'workflow' }, dependsOn: ['one', { name: 'two', ignoreFailure: true }] },
      ],
    });
    await finished(wf.id);
    const jobs = await byName(wf.id);
    expect(jobs.parent.state).toBe('completed');
    const one = { name: null, value: 4, saw: [] };
    expect(jobs.parent.result).toEqual({
      pid: expect.any(Number),
      deps: [
        ['one', 'completed', one],
        ['two', 'discarded', null],
      ],
      results: { one, two: null },
      batch: { total: 2, completed: 1, discarded: 1, cancelled: 0 },
    });
    // Read in a process of its own, not in a worker.
    expect(workers.map((w) => w.pid)).not.toContain(jobs.parent.result.pid);

    // A job outside any workflow gets the worker's refusal, by name and message.
    const lone = await queue.enqueue('flow-isolated', { mode: 'not-in-workflow' }, F);
    const refused = await waitFor(
      async () => (await sql().query(`SELECT result FROM stampeded_jobs WHERE id = $1 AND state = 'completed'`, [lone.id])).rows[0]?.result,
      'the lone isolated job',
    );
    expect(refused.refused).toBe(
      `InvalidJobError: ctx.dependencies() in job ${lone.id}: this job is not part of a workflow or batch, so it has nothing to read. ` +
        `Enqueue it with enqueueWorkflow(), enqueueFlow() or enqueueBatch().`,
    );
  });

  it('cancelWorkflow cancels every job not finished, and nothing it waits for runs afterwards', async () => {
    const wf = await queue.enqueueWorkflow({
      name: 'to-cancel',
      jobs: [
        { name: 'a', task: 'flow-step', options: F, args: { sleepMs: 500 } },
        { name: 'b', task: 'flow-step', options: F, dependsOn: ['a'] },
        { name: 'c', task: 'flow-step', options: F, dependsOn: ['b'] },
      ],
    });
    const result = await queue.cancelWorkflow(wf.id, { reason: 'not needed' });
    expect(result.cancelled).toBeGreaterThanOrEqual(2);
    const jobs = await finished(wf.id);
    expect(jobs.filter((j) => j.state === 'cancelled').map((j) => j.name)).toEqual(expect.arrayContaining(['b', 'c']));
    expect((await byName(wf.id)).c.last_error).toBe('workflow cancelled: not needed');
    expect((await queue.getWorkflow(wf.id))?.state).toBe('finished');
    await expect(queue.cancelWorkflow('0190a0a0-0000-7000-8000-000000000000')).rejects.toThrow(/No workflow with id/);
    expect(await countersAgree()).toEqual([]);
  });

  it('a batch callback runs once, with the counts, when its jobs finish at once in several processes', async () => {
    const jobs = Array.from({ length: 300 }, (_, i) => ({ name: `j${i}`, task: i % 30 === 0 ? 'flow-doomed' : 'flow-step', options: F }));
    const batch = await queue.enqueueBatch({ name: 'emails', jobs, callback: { task: 'flow-callback', options: F } });
    await waitFor(async () => (await sql().query(`SELECT 1 FROM flow_callback_runs WHERE job_id = $1`, [batch.jobs.callback])).rowCount, 'the callback');
    await finished(batch.id);
    const runs = (await sql().query(`SELECT counts FROM flow_callback_runs WHERE job_id = $1`, [batch.jobs.callback])).rows;
    expect(runs).toEqual([{ counts: { total: 300, completed: 290, discarded: 10, cancelled: 0 } }]);
    expect((await queue.getWorkflow(batch.id))?.kind).toBe('batch');
  });

  it('the last two dependencies completed at the same moment by two transactions release the waiting job exactly once', async () => {
    const other = await sqlClient(handle.db.url);
    try {
      const wf = await queue.enqueueWorkflow({
        name: 'race',
        jobs: [
          { name: 'x', task: 'flow-step', options: { queue: 'flows-race' } },
          { name: 'y', task: 'flow-step', options: { queue: 'flows-race' } },
          { name: 'join', task: 'flow-step', dependsOn: ['x', 'y'], options: { queue: 'flows-race' } },
        ],
      });
      const js = jobSql(sql);
      const worker = await js.worker();
      const claimed = await js.claim('flows-race', worker, 10);
      expect(claimed.map((c) => c.id).sort()).toEqual([wf.jobs.x, wf.jobs.y].sort());
      const x = claimed.find((c) => c.id === wf.jobs.x)!;
      const y = claimed.find((c) => c.id === wf.jobs.y)!;
      await sql().query('BEGIN');
      await other.query('BEGIN');
      await js.completeMany(worker, [x], sql());
      // Waits on the join's row, which the first transaction holds.
      const second = js.completeMany(worker, [y], other);
      await waitFor(
        async () => (await api.get(DataSource).query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`)).length,
        'the second completion to wait for the first',
      );
      await sql().query('COMMIT');
      await second;
      await other.query('COMMIT');
      const join = (await sql().query(`SELECT state, deps_pending FROM stampeded_jobs WHERE id = $1`, [wf.jobs.join])).rows[0];
      expect(join).toEqual({ state: 'available', deps_pending: 0 });
      expect(await countersAgree()).toEqual([]);
    } finally {
      await other.end();
    }
  });
});
