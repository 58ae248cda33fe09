import { INSIGHTS_HISTOGRAM, INSIGHTS_TOP_KEYS, ROLLUP_INSIGHTS } from '@stampeded/nestjs/internal';
import { INSIGHTS_KEYS, INSIGHTS_NAMES, INSIGHTS_POINTS, INSIGHTS_WATERMARK } from '@stampeded/dashboard/internal';
import { nestedPlans } from '../support/plans.js';
import { migratedDatabase } from '../support/test-app.js';

// Which plans the insights rollup and the charts get (bench/dashboard-
// queries.mjs times them on a million jobs): the rollup reads the jobs
// table only along the finished_at index, from its watermark; the charts
// never read it at all, only the rollup's own tables.
describe('insights queries', () => {
  const handle = migratedDatabase();
  let parentIndex: Map<string, string>;

  beforeAll(async () => {
    // 100,000 finished jobs over the last two hours, in two queues, a tenant
    // on one in ten, one in fifty failed once before it completed.
    await handle.sql.query(
      `INSERT INTO stampeded_jobs (queue, task, state, tenant_id, destination, finished_at, claimed_at, scheduled_at, errors)
       SELECT (ARRAY['mail', 'work'])[1 + g % 2], 'task-' || (g % 5), CASE WHEN g % 100 = 0 THEN 'discarded' ELSE 'completed' END,
              CASE WHEN g % 10 = 0 THEN 'tenant-' || (g % 300) END, CASE WHEN g % 10 = 1 THEN 'api-' || (g % 3) END,
              now() - make_interval(secs => g % 7200), now() - make_interval(secs => g % 7200) - interval '40 ms',
              now() - make_interval(secs => g % 7200) - interval '90 ms',
              CASE WHEN g % 50 = 0 THEN jsonb_build_array(jsonb_build_object('at', now() - make_interval(secs => g % 7200 + 5), 'attempt', 1, 'kind', 'raised'))
                   ELSE '[]'::jsonb END
         FROM generate_series(1, 100000) g`,
    );
    await handle.sql.query(`VACUUM ANALYZE`);
    const { rows } = await handle.sql.query<{ child: string; parent: string }>(
      `SELECT c.relname AS child, p.relname AS parent
         FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
        WHERE c.relkind = 'i'`,
    );
    parentIndex = new Map(rows.map((r) => [r.child, r.parent]));
  });

  /** The relations each plan reads, the jobs table's indexes by their parent's name. */
  const reads = (plans: string[]) => {
    const text = plans.join('\n');
    return {
      seqScans: [...text.matchAll(/Seq Scan on (\w+)/g)].map((m) => m[1]),
      indexes: [...new Set([...text.matchAll(/Index (?:Only )?Scan(?: Backward)? using (\w+)/g)].map((m) => parentIndex.get(m[1]) ?? m[1]))],
    };
  };

  it('rolls up the finished jobs through the finished_at index, in batches, never a scan of the jobs', async () => {
    const plans = await nestedPlans(handle.sql, async () => {
      await handle.sql.query(ROLLUP_INSIGHTS.text, [1, 20_000, INSIGHTS_HISTOGRAM.buckets, INSIGHTS_HISTOGRAM.perOctave, INSIGHTS_TOP_KEYS]);
    });
    const { seqScans, indexes } = reads(plans);
    expect(seqScans.filter((t) => t.startsWith('stampeded_jobs'))).toEqual([]);
    expect(indexes).toContain('stampeded_jobs_finished_idx');
    // Until the backlog is read, then nothing more: each job once.
    for (;;) {
      const { rows } = await handle.sql.query(ROLLUP_INSIGHTS.text, [1, 20_000, INSIGHTS_HISTOGRAM.buckets, INSIGHTS_HISTOGRAM.perOctave, INSIGHTS_TOP_KEYS]);
      if (!rows[0].more) break;
    }
    const { rows } = await handle.sql.query(
      `SELECT sum(completed + discarded)::int AS n FROM stampeded_insights WHERE grain = 'hour' AND queue = '' AND task = ''`,
    );
    expect(rows[0].n).toBe(100_000);
    // The busiest keys stay bounded: at most the top few per hour, queue, task and dimension.
    const { rows: widest } = await handle.sql.query(
      `SELECT max(n)::int AS n FROM (SELECT count(*) AS n FROM stampeded_insight_keys GROUP BY queue, task, dimension, bucket) k`,
    );
    expect(widest[0].n).toBeLessThanOrEqual(INSIGHTS_TOP_KEYS);
  });

  it.each([
    ['a week of every queue', INSIGHTS_POINTS, ['hour', '', '', 167 * 3600]],
    ['an hour of one queue and task', INSIGHTS_POINTS, ['minute', 'mail', 'task-1', 59 * 60]],
    ['the busiest tenants and destinations of a week', INSIGHTS_KEYS, ['', '', 168 * 3600, 10]],
    ['the queues and tasks of the filters', INSIGHTS_NAMES, []],
    ['how far the rollup has read', INSIGHTS_WATERMARK, []],
  ])('reads %s from the rollup alone', async (_what, statement, values) => {
    const plans = await nestedPlans(handle.sql, async () => {
      await handle.sql.query(statement.text, values);
    });
    expect(plans.join('\n')).toMatch(/stampeded_insight/);
    expect(plans.join('\n')).not.toMatch(/stampeded_jobs/);
  });

  it('reads the points of a chart through the rollup primary key', async () => {
    // The planner's choice on a rollup of this size, its costs unchanged.
    const { rows } = await handle.sql.query(`EXPLAIN (FORMAT JSON) ${INSIGHTS_POINTS.text}`, ['minute', 'mail', 'task-1', 59 * 60]);
    expect(JSON.stringify(rows[0]['QUERY PLAN'])).toMatch(/"Index Name":"stampeded_insights_pkey"/);
  });
});
