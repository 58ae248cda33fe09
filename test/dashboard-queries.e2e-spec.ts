import type pg from 'pg';
import { migrate } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { sqlClient, testDatabase } from './support/test-app.js';
import { listJobsQuery, GET_JOB, ERRORS_BY_FINGERPRINT, THROUGHPUT } from '../libs/dashboard/src/sql/jobs.sql.js';
import { QUEUE_COUNTS, QUEUE_STATE } from '../libs/dashboard/src/sql/queues.sql.js';
import { RUNNING_JOBS, WORKERS } from '../libs/dashboard/src/sql/workers.sql.js';
import { SCHEDULES } from '../libs/dashboard/src/sql/schedules.sql.js';
import { REDRIVE_PREVIEW } from '../libs/dashboard/src/sql/dead-letters.sql.js';

// Which plan each dashboard query gets, not how fast it runs (bench/
// dashboard-queries.mjs times them on a million jobs). With sequential scans
// priced out, a query that still scans stampeded_jobs sequentially has no
// index that can answer it: that is the regression this catches.
describe('dashboard queries', () => {
  let db: TestDatabase;
  let sql: pg.Client;

  beforeAll(async () => {
    db = await testDatabase();
    await migrate(db.url);
    sql = await sqlClient(db.url);
    await sql.query(`SELECT stampeded_create_queue('mail')`);
    await sql.query(`
      INSERT INTO stampeded_jobs (queue, task, state, tenant_id, destination, finished_at, error_fingerprint, last_error, source_id, source_queue)
      SELECT (ARRAY['mail', 'work', 'work-dead'])[1 + g % 3], 'task-' || (g % 7),
             (ARRAY['available', 'retryable', 'completed', 'discarded', 'cancelled'])[1 + g % 5],
             CASE WHEN g % 4 = 0 THEN 'tenant-' || (g % 10) END,
             CASE WHEN g % 6 = 0 THEN 'api-' || (g % 3) END,
             CASE WHEN g % 5 >= 2 THEN now() - make_interval(secs => g) END,
             CASE WHEN g % 5 IN (1, 3) THEN stampeded_fingerprint('boom ' || (g % 4)) END,
             CASE WHEN g % 5 IN (1, 3) THEN 'boom ' || (g % 4) END,
             CASE WHEN g % 3 = 2 THEN uuidv7() END,
             CASE WHEN g % 3 = 2 THEN 'work' END
        FROM generate_series(1, 3000) g`);
    await sql.query(`ANALYZE`);
    await sql.query(`SET enable_seqscan = off`);
  });

  afterAll(async () => {
    await sql?.end();
    await db?.drop();
  });

  async function plan(text: string, values: unknown[] = []): Promise<string> {
    const { rows } = await sql.query(`EXPLAIN ${text}`, values);
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  }

  const after = { queue: 'work', id: '01a2372e-0000-7000-8000-000000000000' };
  it.each([
    ['every job, newest first', {}, 'in key order'],
    ['one queue', { queue: 'mail' }, 'in key order'],
    ['one queue and state, after a cursor', { queue: 'work', state: 'discarded', after }, 'in key order'],
    ['a page after a cursor', { after }, 'in key order'],
    ['a task', { task: 'task-3' }, 'in key order'],
    ['a tenant', { tenant: 'tenant-4' }, 'sorting what matched'],
    ['a destination and state', { destination: 'api-1', state: 'retryable' }, 'sorting what matched'],
  ])('lists jobs by an index: %s, %s', async (_what, filters, order) => {
    const { statement, values } = listJobsQuery(filters, 51);
    const text = await plan(statement.text, values);
    expect(text).not.toMatch(/Seq Scan on stampeded_jobs/);
    // A Sort node, not the Merge Append's "Sort Key" that merges partitions in key order.
    if (order === 'in key order') expect(text).not.toMatch(/(^|->\s+)(Incremental )?Sort\s+\(/m);
    else expect(text).toMatch(/(tenant_id|destination)_state_idx/);
  });

  it.each([
    ['a job by id and queue', GET_JOB.text, ['01a2372e-0000-7000-8000-000000000000', 'mail']],
    ['a job by id alone (skip scan of the primary key)', GET_JOB.text, ['01a2372e-0000-7000-8000-000000000000', null]],
    ['errors by fingerprint', ERRORS_BY_FINGERPRINT.text, [null, 50]],
    ['throughput over the last hour', THROUGHPUT.text, [60]],
    ['queue verdicts and claim heads', QUEUE_STATE.text, []],
    ['workers and their running jobs', WORKERS.text, []],
    ['running jobs', RUNNING_JOBS.text, [200]],
    ['a dead-letter queue to redrive', REDRIVE_PREVIEW.text, ['work-dead', null, null]],
  ])('reads %s by an index', async (_what, text, values) => {
    expect(await plan(text, values)).not.toMatch(/Seq Scan on stampeded_jobs/);
  });

  it('counts only from the counters table, and schedules by their key', async () => {
    expect(await plan(QUEUE_COUNTS.text)).not.toMatch(/stampeded_jobs/);
    expect(await plan(SCHEDULES.text)).not.toMatch(/stampeded_jobs/);
  });
});
