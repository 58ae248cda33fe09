import type { INestApplicationContext } from '@nestjs/common';
import { MaintenanceService, QueueService, Task, UnrecoverableError, type TaskHandler, migrate } from '@stampeded/nestjs';
import { INSIGHTS_HISTOGRAM, INSIGHTS_PRECISION, addHistogram, percentile } from '@stampeded/nestjs/internal';
import { migratedDatabase, bootApp, waitFor } from '../support/test-app.js';

@Task('steady', { queue: 'reports' })
class Steady implements TaskHandler<{ ms: number }> {
  async handle(args: { ms: number }) {
    // Work of a known length: what the run-time percentiles are checked against.
    await new Promise((resolve) => setTimeout(resolve, args.ms));
  }
}

@Task('flaky', { queue: 'reports', maxAttempts: 5, backoff: { baseMs: 1, maxMs: 1 } })
class Flaky implements TaskHandler {
  handle(_: object, ctx: { attempt: number }) {
    if (ctx.attempt < 3) throw new Error(`not yet (attempt ${ctx.attempt})`);
  }
}

@Task('doomed', { queue: 'mail', maxAttempts: 2, backoff: { baseMs: 1, maxMs: 1 } })
class Doomed implements TaskHandler {
  handle() {
    throw new Error('always fails');
  }
}

@Task('hopeless', { queue: 'mail' })
class Hopeless implements TaskHandler {
  handle() {
    throw new UnrecoverableError('nothing to retry');
  }
}

// Jobs run by the app's own workers, finished as a real fleet finishes them;
// the rollup run by hand (maintenance off: no timers), with a settle time of
// 1 ms, so that each run reads every job finished before it.
describe('the insights rollup', () => {
  let app: INestApplicationContext;
  let queue: QueueService;
  let maintenance: MaintenanceService;
  // Before the database's own afterAll, which drops it: the app closes first.
  afterAll(async () => {
    await app?.close();
  });
  const handle = migratedDatabase();

  beforeAll(async () => {
    app = await bootApp(handle.db.url, {
      providers: [Steady, Flaky, Doomed, Hopeless],
      stampeded: {
        worker: { concurrency: 10 },
        maintenance: { enabled: false, completedRetention: 1, failedRetention: 1, insights: { settle: 1 } },
      },
    });
    queue = app.get(QueueService);
    maintenance = app.get(MaintenanceService);
  });

  const finished = async (ids: string[]) =>
    waitFor(async () => {
      const { rows } = await handle.sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE id = ANY($1::uuid[]) AND finished_at IS NOT NULL`, [ids]);
      return rows[0].n === ids.length;
    }, `${ids.length} jobs to finish`);

  /** The rollup's counts for one grain, queue and task ('' for every), summed over its buckets. */
  async function counts(grain: 'minute' | 'hour', q: string, task: string) {
    const { rows } = await handle.sql.query(
      `SELECT coalesce(sum(completed), 0)::int AS completed, coalesce(sum(failed), 0)::int AS failed, coalesce(sum(retried), 0)::int AS retried,
              coalesce(sum(discarded), 0)::int AS discarded, coalesce(sum(cancelled), 0)::int AS cancelled
         FROM stampeded_insights WHERE grain = $1 AND queue = $2 AND task = $3`,
      [grain, q, task],
    );
    return rows[0];
  }

  async function histogram(column: 'wait_ms' | 'run_ms', q: string, task: string): Promise<number[]> {
    const { rows } = await handle.sql.query(`SELECT ${column} AS h FROM stampeded_insights WHERE grain = 'hour' AND queue = $1 AND task = $2`, [q, task]);
    return rows.reduce((sum: number[], r: { h: number[] }) => addHistogram(sum, r.h), new Array(INSIGHTS_HISTOGRAM.buckets).fill(0));
  }

  const everything = async () => (await handle.sql.query(`SELECT * FROM stampeded_insights ORDER BY grain, queue, task, bucket`)).rows;
  const keys = async () => (await handle.sql.query(`SELECT * FROM stampeded_insight_keys ORDER BY queue, task, dimension, bucket, key`)).rows;

  const ids: string[] = [];

  it('waits with the pruner until it has read the finished jobs, then counts each outcome once', async () => {
    for (let i = 0; i < 40; i++) {
      ids.push((await queue.enqueue('steady', { ms: 5 + i * 4 }, { tenantId: i % 4 === 0 ? 'acme' : 'globex', destination: 'api.example' })).id);
    }
    for (let i = 0; i < 3; i++) ids.push((await queue.enqueue('flaky', {}, { tenantId: 'acme' })).id);
    for (let i = 0; i < 2; i++) ids.push((await queue.enqueue('doomed', {}, { destination: 'smtp.example' })).id);
    ids.push((await queue.enqueue('hopeless', {})).id);
    const later = await queue.enqueue('steady', { ms: 1 }, { runAt: new Date(Date.now() + 3_600_000) });
    await queue.cancel(later.id);
    ids.push(later.id);
    await finished(ids);

    // Retention of 1 ms, and yet the pruner deletes nothing the rollup has not read.
    expect(await maintenance.run('pruner')).toMatchObject({ jobsDeleted: 0 });

    expect(await maintenance.run('insights')).toMatchObject({ jobs: ids.length, backlogLeft: false });
    expect(await counts('minute', 'reports', 'steady')).toEqual({ completed: 40, failed: 0, retried: 0, discarded: 0, cancelled: 1 });
    // Two failed attempts each, both retried, then completed.
    expect(await counts('minute', 'reports', 'flaky')).toEqual({ completed: 3, failed: 6, retried: 6, discarded: 0, cancelled: 0 });
    // Two attempts each: the first retried, the second the end.
    expect(await counts('minute', 'mail', 'doomed')).toEqual({ completed: 0, failed: 4, retried: 2, discarded: 2, cancelled: 0 });
    expect(await counts('minute', 'mail', 'hopeless')).toEqual({ completed: 0, failed: 1, retried: 0, discarded: 1, cancelled: 0 });
    // Each level of "every" is the sum of what it covers, at either grain.
    const all = { completed: 43, failed: 11, retried: 8, discarded: 3, cancelled: 1 };
    expect(await counts('minute', '', '')).toEqual(all);
    expect(await counts('hour', '', '')).toEqual(all);
    expect(await counts('minute', 'mail', '')).toEqual({ completed: 0, failed: 5, retried: 2, discarded: 3, cancelled: 0 });
    expect(await counts('hour', '', 'flaky')).toEqual(await counts('hour', 'reports', 'flaky'));

    const { rows: tenants } = await handle.sql.query(
      `SELECT dimension, key, sum(jobs)::int AS jobs, sum(discarded)::int AS discarded FROM stampeded_insight_keys
        WHERE queue = '' AND task = '' GROUP BY dimension, key ORDER BY dimension, key`,
    );
    expect(tenants).toEqual([
      { dimension: 'destination', key: 'api.example', jobs: 40, discarded: 0 },
      { dimension: 'destination', key: 'smtp.example', jobs: 2, discarded: 2 },
      { dimension: 'tenant', key: 'acme', jobs: 13, discarded: 0 },
      { dimension: 'tenant', key: 'globex', jobs: 30, discarded: 0 },
    ]);
  });

  it('reads run and wait percentiles within the histogram precision', async () => {
    const { rows } = await handle.sql.query(
      `SELECT extract(epoch FROM finished_at - claimed_at) * 1000 AS run, extract(epoch FROM claimed_at - scheduled_at) * 1000 AS wait
         FROM stampeded_jobs WHERE task = 'steady' AND state = 'completed'`,
    );
    const exact = (values: number[], p: number) => values.sort((a, b) => a - b)[Math.ceil(p * values.length) - 1];
    const within = (read: number | null, truth: number) => {
      if (truth < 1) expect(read).toBe(0.5);
      else expect(Math.abs(read! - truth) / truth).toBeLessThanOrEqual(INSIGHTS_PRECISION + 1e-9);
    };
    const runs = await histogram('run_ms', 'reports', 'steady');
    const waits = await histogram('wait_ms', 'reports', 'steady');
    expect(runs.reduce((a, b) => a + b)).toBe(40);
    expect(waits.reduce((a, b) => a + b)).toBe(40);
    for (const p of [0.5, 0.95, 0.99]) {
      within(
        percentile(runs, p),
        exact(
          rows.map((r) => Number(r.run)),
          p,
        ),
      );
      within(
        percentile(waits, p),
        exact(
          rows.map((r) => Math.max(0, Number(r.wait))),
          p,
        ),
      );
    }
  });

  it('keeps its history when the pruner deletes the jobs, and adds nothing when run again', async () => {
    const before = await everything();
    const keysBefore = await keys();
    const pruned = (await maintenance.run('pruner')) as { jobsDeleted: number };
    expect(pruned.jobsDeleted).toBe(ids.length);
    expect(await maintenance.run('insights')).toMatchObject({ jobs: 0 });
    expect(await everything()).toEqual(before);
    expect(await keys()).toEqual(keysBefore);
  });

  it('counts each job once when two runs overlap', async () => {
    const more: string[] = [];
    for (let i = 0; i < 30; i++) more.push((await queue.enqueue('steady', { ms: 1 })).id);
    await finished(more);
    const before = await counts('hour', '', '');
    const runs = (await Promise.all([maintenance.run('insights'), maintenance.run('insights')])) as { jobs: number }[];
    expect(runs[0].jobs + runs[1].jobs).toBe(30);
    expect(await counts('hour', '', '')).toEqual({ ...before, completed: before.completed + 30 });
  });

  it('reads a backlog in batches that end between two finish times', async () => {
    // Three finish times, 25 jobs each, as three batched completions write
    // them: batches of 10 must not cut one, and every job is read once.
    const { rows } = await handle.sql.query(
      `INSERT INTO stampeded_jobs (queue, task, state, finished_at, claimed_at, scheduled_at)
       SELECT 'bulk', 'import', 'completed', now() + (g / 25) * interval '1 microsecond', now() - interval '2 s', now() - interval '3 s'
         FROM generate_series(0, 74) g RETURNING id`,
    );
    expect(rows).toHaveLength(75);
    const small = await bootApp(handle.db.url, {
      via: 'connection',
      stampeded: { worker: { enabled: false }, maintenance: { enabled: false, insights: { settle: 1, batchSize: 10 } } },
    });
    try {
      const result = (await small.get(MaintenanceService).run('insights')) as { jobs: number; batches: number };
      expect(result.jobs).toBe(75);
      expect(result.batches).toBeGreaterThanOrEqual(3);
      expect(await counts('hour', 'bulk', 'import')).toMatchObject({ completed: 75 });
    } finally {
      await small.close();
    }
  });
});

describe('the first run of the insights rollup', () => {
  const handle = migratedDatabase();

  it('starts from the oldest finished job', async () => {
    await handle.sql.query(
      `INSERT INTO stampeded_jobs (queue, task, state, finished_at, claimed_at, scheduled_at)
       SELECT 'old', 'report', 'completed', now() - g * interval '1 hour', now() - g * interval '1 hour' - interval '2 s', now() - g * interval '1 hour' - interval '3 s'
         FROM generate_series(1, 5) g`,
    );
    await migrate(handle.db.url);
    const app = await bootApp(handle.db.url, { stampeded: { worker: { enabled: false }, maintenance: { enabled: false, insights: { settle: 1 } } } });
    try {
      expect(await app.get(MaintenanceService).run('insights')).toMatchObject({ jobs: 5 });
      const { rows } = await handle.sql.query(
        `SELECT count(*)::int AS n, sum(completed)::int AS completed FROM stampeded_insights WHERE grain = 'hour' AND queue = 'old' AND task = 'report'`,
      );
      expect(rows[0]).toEqual({ n: 5, completed: 5 });
    } finally {
      await app.close();
    }
  });
});
