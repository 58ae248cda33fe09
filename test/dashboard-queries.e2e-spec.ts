import type pg from 'pg';
import { migrate } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { sqlClient, testDatabase } from './support/test-app.js';
import { listJobsQuery, GET_JOB, ERRORS_BY_FINGERPRINT, THROUGHPUT } from '../libs/dashboard/src/sql/jobs.sql.js';
import { QUEUE_COUNTS, QUEUE_STATE } from '../libs/dashboard/src/sql/queues.sql.js';
import { RUNNING_JOBS, WORKERS } from '../libs/dashboard/src/sql/workers.sql.js';
import { SCHEDULES } from '../libs/dashboard/src/sql/schedules.sql.js';
import { REDRIVE_BATCH, REDRIVE_PREVIEW } from '../libs/stampeded/src/sql/dead-letters.sql.js';

// Which plan each dashboard query gets, not how fast it runs (bench/
// dashboard-queries.mjs times them on a million jobs). The table is modest
// but shaped like a busy install -- mostly finished jobs, a few failing, a
// dead-letter queue mostly handled -- and analysed, with the planner left to
// its own costs: a plan that names the index is the planner choosing it, not
// being pushed to it. Each query must read stampeded_jobs through the index
// named for it, or through none (the counters). A partition's index is
// named for its parent's, so plans are read through pg_inherits.
describe('dashboard queries', () => {
  let db: TestDatabase;
  let sql: pg.Client;
  let parentIndex: Map<string, string>;
  const WORKER = '0199a000-0000-7000-8000-0000000000aa';

  beforeAll(async () => {
    db = await testDatabase();
    await migrate(db.url);
    sql = await sqlClient(db.url);
    await sql.query(`SELECT stampeded_create_queue('mail')`);
    await sql.query(`INSERT INTO stampeded_workers (id, hostname, pid) VALUES ($1, 'test', 1)`, [WORKER]);
    // 100,000 jobs: mail and work 40% each, work-dead (copies of work's jobs) 20%.
    // 1% each available, retryable, discarded, executing, cancelled; the rest completed.
    await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, state, tenant_id, destination, finished_at, failure_kind, error_fingerprint,
                                   last_error, source_id, source_queue, claimed_by, claimed_at, scheduled_at)
       SELECT q.queue, CASE q.queue WHEN 'mail' THEN 'send-' ELSE 'sync-' END || (g % 5), s.state,
              CASE WHEN g % 10 = 0 THEN 'tenant-' || (g % 100) END,
              CASE WHEN g % 10 = 1 THEN 'api-' || (g % 3) END,
              CASE WHEN s.state IN ('completed', 'discarded', 'cancelled') THEN now() - make_interval(secs => g % 7200) END,
              CASE WHEN s.state IN ('retryable', 'discarded') THEN 'raised' END,
              CASE WHEN s.state IN ('retryable', 'discarded') THEN stampeded_fingerprint(e.error) END,
              CASE WHEN s.state IN ('retryable', 'discarded') THEN e.error END,
              CASE WHEN q.queue = 'work-dead' THEN uuidv7() END,
              CASE WHEN q.queue = 'work-dead' THEN 'work' END,
              CASE WHEN s.state = 'executing' THEN $1::uuid END,
              CASE WHEN s.state = 'executing' THEN now() END,
              now() - make_interval(secs => g % 600)
         FROM generate_series(1, 100000) g
        CROSS JOIN LATERAL (SELECT CASE WHEN g % 10 < 4 THEN 'mail' WHEN g % 10 < 8 THEN 'work' ELSE 'work-dead' END AS queue) q
        CROSS JOIN LATERAL (SELECT (ARRAY['available', 'retryable', 'discarded', 'executing', 'cancelled'])[1 + (g / 10) % 100] AS state) p
        CROSS JOIN LATERAL (SELECT coalesce(p.state, 'completed') AS state) s
        CROSS JOIN LATERAL (SELECT (ARRAY['timeout after 30 s', 'connection refused', 'upstream 503', 'card declined'])[1 + g % 4] AS error) e`,
      [WORKER],
    );
    await sql.query(`VACUUM ANALYZE`);
    const { rows } = await sql.query<{ child: string; parent: string }>(
      `SELECT c.relname AS child, p.relname AS parent
         FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
        WHERE c.relkind = 'i'`,
    );
    parentIndex = new Map(rows.map((r) => [r.child, r.parent]));
  });

  afterAll(async () => {
    await sql?.end();
    await db?.drop();
  });

  interface PlanNode {
    'Node Type': string;
    'Relation Name'?: string;
    'Index Name'?: string;
    Plans?: PlanNode[];
  }

  /** The plan's text, the indexes it reads stampeded_jobs through (by parent name), and whether it scans the jobs sequentially. */
  async function plan(text: string, values: unknown[] = [], generic = false) {
    const { rows } = await sql.query(
      generic ? `EXPLAIN (GENERIC_PLAN, FORMAT JSON) ${text}` : `EXPLAIN (FORMAT JSON) ${text}`,
      generic ? [] : values,
    );
    const root: PlanNode = rows[0]['QUERY PLAN'][0].Plan;
    const indexes = new Set<string>();
    const seqScans: string[] = [];
    const nodes: string[] = [];
    const walk = (node: PlanNode) => {
      nodes.push(node['Node Type']);
      if (node['Index Name']) indexes.add(parentIndex.get(node['Index Name']) ?? node['Index Name']);
      if (node['Node Type'] === 'Seq Scan' && node['Relation Name']?.startsWith('stampeded_jobs')) seqScans.push(node['Relation Name']);
      node.Plans?.forEach(walk);
    };
    walk(root);
    return { indexes: [...indexes], seqScans, nodes, json: JSON.stringify(root) };
  }

  const after = { queue: 'work', id: '01a2372e-0000-7000-8000-000000000000' };
  it.each([
    ['every job, newest first', {}, 'stampeded_jobs_pkey'],
    ['one queue', { queue: 'mail' }, 'stampeded_jobs_pkey'],
    ['one queue and state, after a cursor', { queue: 'work', state: 'discarded', after }, 'stampeded_jobs_pkey'],
    ['a page after a cursor', { after }, 'stampeded_jobs_pkey'],
    ['a task', { task: 'sync-3' }, 'stampeded_jobs_task_idx'],
    ['a task and a rare state', { task: 'send-1', state: 'retryable' }, 'stampeded_jobs_task_idx|stampeded_jobs_claim_idx'],
    ['a rare state', { state: 'retryable' }, 'stampeded_jobs_claim_idx'],
    ['jobs running', { state: 'executing' }, 'stampeded_jobs_expiry_idx|stampeded_jobs_claimed_idx'],
    ['a tenant', { tenant: 'tenant-40' }, 'stampeded_jobs_tenant_idx'],
    ['a destination and state', { destination: 'api-1', state: 'retryable' }, 'stampeded_jobs_destination_idx'],
  ])('lists jobs by an index: %s', async (_what, filters, expected) => {
    const { statement, values } = listJobsQuery(filters, 51);
    const { indexes, seqScans } = await plan(statement.text, values);
    expect(seqScans).toEqual([]);
    expect(indexes.join(' ')).toMatch(new RegExp(expected));
  });

  it('lists a task in key order, without sorting what matched', async () => {
    const { statement, values } = listJobsQuery({ task: 'sync-3' }, 51);
    const { nodes } = await plan(statement.text, values);
    expect(nodes).toContain('Merge Append');
    expect(nodes).not.toContain('Sort');
  });

  const bound = 'ffffffff-ffff-7fff-bfff-ffffffffffff';
  it.each([
    ['a job by id and queue', GET_JOB.text, ['01a2372e-0000-7000-8000-000000000000', 'mail'], 'stampeded_jobs_pkey'],
    ['a job by id alone (skip scan of the primary key)', GET_JOB.text, ['01a2372e-0000-7000-8000-000000000000', null], 'stampeded_jobs_pkey'],
    ['errors by fingerprint', ERRORS_BY_FINGERPRINT.text, [null, 50], 'stampeded_jobs_failing_idx'],
    ['errors by fingerprint in one queue', ERRORS_BY_FINGERPRINT.text, ['work', 50], 'stampeded_jobs_failing_idx'],
    ['throughput over the last hour', THROUGHPUT.text, [60], 'stampeded_jobs_finished_idx'],
    ['queue verdicts and claim heads', QUEUE_STATE.text, [], 'stampeded_jobs_claim_idx'],
    ['workers and their running jobs', WORKERS.text, [], 'stampeded_jobs_claimed_idx'],
    ['running jobs', RUNNING_JOBS.text, [200], 'stampeded_jobs_claimed_idx'],
    ['a dead-letter queue to redrive', REDRIVE_PREVIEW.text, ['work-dead', null, null, bound], 'stampeded_jobs_dead_letter_idx'],
    ['a dead-letter queue to redrive, one task', REDRIVE_PREVIEW.text, ['work-dead', 'sync-2', null, bound], 'stampeded_jobs_dead_letter_idx'],
    ['a batch of a redrive', REDRIVE_BATCH.text, ['work-dead', null, null, bound, null, 1000], 'stampeded_jobs_dead_letter_idx'],
  ])('reads %s through its index', async (_what, text, values, expected) => {
    const { indexes, seqScans } = await plan(text, values);
    expect(seqScans).toEqual([]);
    expect(indexes).toContain(expected);
  });

  // A named statement is planned generically after five runs on a
  // connection: the plan without the values must use the index too.
  it.each([
    ['errors by fingerprint', ERRORS_BY_FINGERPRINT.text, 'stampeded_jobs_failing_idx'],
    ['throughput', THROUGHPUT.text, 'stampeded_jobs_finished_idx'],
    ['a task', listJobsQuery({ task: 'x' }, 51).statement.text, 'stampeded_jobs_task_idx'],
    ['a redrive preview', REDRIVE_PREVIEW.text, 'stampeded_jobs_dead_letter_idx'],
    ['a batch of a redrive', REDRIVE_BATCH.text, 'stampeded_jobs_dead_letter_idx'],
  ])('reads %s through its index in the generic plan too', async (_what, text, expected) => {
    const { indexes, seqScans } = await plan(text, [], true);
    expect(seqScans).toEqual([]);
    expect(indexes).toContain(expected);
  });

  it('counts only from the counters table, and schedules by their key', async () => {
    expect((await plan(QUEUE_COUNTS.text)).json).not.toMatch(/stampeded_jobs/);
    expect((await plan(SCHEDULES.text)).json).not.toMatch(/stampeded_jobs/);
  });
});
