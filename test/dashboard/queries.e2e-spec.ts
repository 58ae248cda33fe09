import type pg from 'pg';
import { migrate } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { sqlClient, testDatabase } from '../support/test-app.js';
import { REDRIVE_BATCH, REDRIVE_PREVIEW } from '@stampeded/nestjs/internal';
import { StampededInspector, InspectorInputError, encodeCursor, type JobPage } from '@stampeded/dashboard/inspector';
import {
  listJobsQuery,
  GET_JOB,
  ERRORS_BY_FINGERPRINT,
  THROUGHPUT,
  QUEUE_COUNTS,
  QUEUE_STATE,
  RUNNING_JOBS,
  WORKERS,
  SCHEDULES,
  DEAD_LETTER_COPY,
  DEDUP_TWINS,
  NEIGHBOUR_SCAN,
  ORDERING_NEIGHBOURS,
} from '@stampeded/dashboard/internal';

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
    // The last 120 jobs in the list's order (mail, the oldest ids): one in
    // ten of task rebuild-index, which no other job has.
    await sql.query(
      `INSERT INTO stampeded_jobs (id, queue, task, state, finished_at)
       SELECT uuidv7(-(interval '1 day' + n * interval '1 second')), 'mail', CASE WHEN n % 10 = 0 THEN 'rebuild-index' ELSE 'send-0' END,
              'completed', now() - interval '1 day'
         FROM generate_series(1, 120) n`,
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
    'Scan Direction'?: string;
    Plans?: PlanNode[];
  }

  /** The plan's text, the indexes it reads stampeded_jobs through (by parent name), and whether it scans the jobs sequentially. */
  async function plan(text: string, values: unknown[] = [], generic = false) {
    const { rows } = await sql.query(generic ? `EXPLAIN (GENERIC_PLAN, FORMAT JSON) ${text}` : `EXPLAIN (FORMAT JSON) ${text}`, generic ? [] : values);
    const root: PlanNode = rows[0]['QUERY PLAN'][0].Plan;
    const indexes = new Set<string>();
    const seqScans: string[] = [];
    const nodes: string[] = [];
    const walk = (node: PlanNode) => {
      nodes.push(node['Scan Direction'] === 'Backward' ? `${node['Node Type']} Backward` : node['Node Type']);
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
    ['a task and a rare state', { task: 'send-1', state: 'retryable' }, 'stampeded_jobs_claim_idx'],
    ['a rare state', { state: 'retryable' }, 'stampeded_jobs_claim_idx'],
    ['jobs running', { state: 'executing' }, 'stampeded_jobs_expiry_idx|stampeded_jobs_claimed_idx'],
    ['a tenant', { tenant: 'tenant-40' }, 'stampeded_jobs_tenant_idx'],
    ['a destination and state', { destination: 'api-1', state: 'retryable' }, 'stampeded_jobs_destination_idx'],
  ])('lists jobs by an index: %s', async (_what, filters, expected) => {
    const { statement, values, scan } = listJobsQuery(filters, 51);
    expect(scan).toBeNull();
    const { indexes, seqScans } = await plan(statement.text, values);
    expect(seqScans).toEqual([]);
    expect(indexes.join(' ')).toMatch(new RegExp(expected));
  });

  // No index leads with the task (migration 4's notes: one would cost every
  // insert a third more WAL): a bounded walk of the primary key in the
  // page's own order, stopped by the inner LIMIT, neither sorting nor
  // reading the table sequentially, also in the generic plan.
  it.each([
    ['a task', { task: 'sync-3' }],
    ['a task after a cursor', { task: 'sync-3', after }],
    ['a task and a state no index holds', { task: 'send-1', state: 'discarded' }],
    ['a task and a state no index holds, after a cursor', { task: 'send-1', state: 'completed', after }],
  ])('lists %s by a bounded scan of the primary key, without sorting', async (_what, filters) => {
    const { statement, values, scan } = listJobsQuery(filters, 51, 20_000);
    expect(scan).toBe(20_000);
    expect(values).toContain(20_000);
    for (const generic of [false, true]) {
      const { indexes, seqScans, nodes } = await plan(statement.text, values, generic);
      expect(seqScans).toEqual([]);
      expect(indexes).toEqual(['stampeded_jobs_pkey']);
      expect(nodes.filter((n) => /Sort/.test(n))).toEqual([]);
      expect(nodes).toContain('Index Scan Backward');
      // The budget's LIMIT sits on the scan itself, below the task's filter.
      expect(nodes.slice(nodes.indexOf('Subquery Scan'))).toContain('Limit');
    }
  });

  // The searches no index serves (an id's tail, args or meta containing a
  // value) are the same bounded walk of the primary key, within the queue
  // when one is given: never a read of a whole partition.
  it.each([
    ['args containing a value', { args: '{"orderId":42}' }],
    ['meta containing a value, after a cursor', { meta: '{"activejob":{}}', after }],
    ["an id's tail", { idTail: 'e02e15ff571a' }],
    ['args containing a value, in one queue', { queue: 'work', args: '{"orderId":42}' }],
    ["an id's tail and a state no index holds, in one queue", { queue: 'mail', idTail: '571a', state: 'completed' }],
    ['an error fingerprint and a state the failing index does not hold', { fingerprint: 'abcdef012345', state: 'completed' }],
  ])('searches %s by a bounded scan of the primary key, without sorting', async (_what, filters) => {
    const { statement, values, scan } = listJobsQuery(filters, 51, 20_000);
    expect(scan).toBe(20_000);
    for (const generic of [false, true]) {
      const { indexes, seqScans, nodes } = await plan(statement.text, values, generic);
      expect(seqScans).toEqual([]);
      expect(indexes).toEqual(['stampeded_jobs_pkey']);
      expect(nodes.filter((n) => /Sort/.test(n))).toEqual([]);
      expect(nodes.slice(nodes.indexOf('Subquery Scan'))).toContain('Limit');
    }
  });

  it.each([
    ['a whole id (skip scan of the primary key)', { id: '01a2372e-0000-7000-8000-000000000000' }, 'stampeded_jobs_pkey'],
    ['an error fingerprint by its first digits', { fingerprint: 'PREFIX' }, 'stampeded_jobs_failing_idx'],
    ['an error fingerprint and a failing state, in a queue', { fingerprint: 'PREFIX', state: 'discarded', queue: 'work' }, 'stampeded_jobs_failing_idx'],
    ['an error fingerprint and args', { fingerprint: 'PREFIX', args: '{"orderId":42}' }, 'stampeded_jobs_failing_idx'],
    ['a tenant and meta', { tenant: 'tenant-40', meta: '{"activejob":{}}' }, 'stampeded_jobs_tenant_idx'],
  ])('searches %s by an index', async (_what, filters, expected) => {
    if ('fingerprint' in filters) {
      const { rows } = await sql.query(`SELECT left(encode(stampeded_fingerprint('upstream 503'), 'hex'), 12) AS prefix`);
      filters = { ...filters, fingerprint: rows[0].prefix };
    }
    const { statement, values, scan } = listJobsQuery(filters, 51);
    expect(scan).toBeNull();
    for (const generic of [false, true]) {
      const { indexes, seqScans } = await plan(statement.text, values, generic);
      expect(seqScans).toEqual([]);
      expect(indexes.join(' ')).toMatch(new RegExp(expected));
    }
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
    [
      "a discarded job's dead-letter copy",
      DEAD_LETTER_COPY.text,
      ['work-dead', bound, '00000000-0000-7000-8000-000000000000', bound],
      'stampeded_jobs_dead_letter_idx',
    ],
    [
      "an ordering key's neighbours",
      ORDERING_NEIGHBOURS.text,
      ['work', 'customer-1', '01a2372e-0000-7000-8000-000000000000', NEIGHBOUR_SCAN],
      'stampeded_jobs_pkey',
    ],
    ['dedup twins in the periods next to a job', DEDUP_TWINS.text, ['work', 'digest:1', new Date(), 'day'], 'stampeded_jobs_dedup_idx'],
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
    ['a redrive preview', REDRIVE_PREVIEW.text, 'stampeded_jobs_dead_letter_idx'],
    ['a batch of a redrive', REDRIVE_BATCH.text, 'stampeded_jobs_dead_letter_idx'],
  ])('reads %s through its index in the generic plan too', async (_what, text, expected) => {
    const { indexes, seqScans } = await plan(text, [], true);
    expect(seqScans).toEqual([]);
    expect(indexes).toContain(expected);
  });

  describe('a task no index serves, a bounded scan a page', () => {
    let inspector: StampededInspector;
    let order: { queue: string; id: string; task: string; state: string }[];

    beforeAll(async () => {
      inspector = new StampededInspector({ schema: 'public', query: async (statement, values) => (await sql.query(statement.text, values)).rows });
      // Every job in the list's order: what each page's scan should have read.
      order = (await sql.query(`SELECT queue, id::text AS id, task, state FROM stampeded_jobs ORDER BY queue DESC, id DESC`)).rows;
    });

    /**
     * Follows the pages' cursors to the end, checking each page against the
     * jobs its scan covered: the `budget` jobs after its cursor, of which it
     * must show the first `limit` that match, then hand on a cursor from its
     * last job shown when more matched, or else from where the scan stopped.
     */
    async function clickThrough(task: string, budget: number, limit: number, from?: { queue: string; id: string }) {
      const pages: JobPage[] = [];
      let after = from ? encodeCursor(from.queue, from.id) : undefined;
      let start = from ? order.findIndex((j) => j.queue === from.queue && j.id === from.id) + 1 : 0;
      for (;;) {
        const page = await inspector.jobs({ task, scan: budget, limit, after });
        pages.push(page);
        const scanned = order.slice(start, start + budget);
        const matched = scanned.filter((j) => j.task === task);
        expect(page.jobs.map((j) => j.id)).toEqual(matched.slice(0, limit).map((j) => j.id));
        if (matched.length > limit) {
          expect(page.scan).toEqual({ budget, ranOut: false });
          const last = matched[limit - 1];
          expect(page.next).toBe(encodeCursor(last.queue, last.id));
          start = order.indexOf(last) + 1;
        } else if (scanned.length === budget) {
          expect(page.scan).toEqual({ budget, ranOut: true });
          const end = scanned[budget - 1];
          expect(page.next).toBe(encodeCursor(end.queue, end.id));
          start += budget;
        } else {
          expect(page.scan).toEqual({ budget, ranOut: false });
          expect(page.next).toBeNull();
          return pages;
        }
        after = page.next!;
        expect(pages.length).toBeLessThan(1000);
      }
    }

    const rebuilds = () => order.filter((j) => j.task === 'rebuild-index').map((j) => j.id);

    it('reports a budget spent on a first page with no match, and the next page resumes where the scan stopped', async () => {
      const first = await inspector.jobs({ task: 'rebuild-index' });
      const end = order[20_000 - 1];
      expect(first).toEqual({ jobs: [], next: encodeCursor(end.queue, end.id), scan: { budget: 20_000, ranOut: true } });
      const second = await inspector.jobs({ task: 'rebuild-index', after: first.next! });
      const secondEnd = order[40_000 - 1];
      expect(second).toEqual({ jobs: [], next: encodeCursor(secondEnd.queue, secondEnd.id), scan: { budget: 20_000, ranOut: true } });
    });

    it('finds every job of a task that only the end of the table holds, each exactly once, a bounded chunk at a time', async () => {
      const pages = await clickThrough('rebuild-index', 20_000, 5);
      // Five pages of 20,000 with nothing to show, then the last 120 jobs.
      expect(pages.slice(0, 5).every((p) => p.jobs.length === 0 && p.scan?.ranOut)).toBe(true);
      const found = pages.flatMap((p) => p.jobs.map((j) => j.id as string));
      expect(found).toHaveLength(12);
      expect(found).toEqual(rebuilds());
    });

    it('shows the few matches a spent budget found, and resumes after the scan, not after the last match', async () => {
      // From just before the last 120 jobs, 25 at a time: matches at the 10th and 20th.
      const from = order[order.length - 121];
      const [page] = await clickThrough('rebuild-index', 25, 5, from);
      expect(page.jobs.map((j) => j.id)).toEqual(rebuilds().slice(0, 2));
      expect(page.scan).toEqual({ budget: 25, ranOut: true });
      const stoppedAt = order[order.length - 121 + 25];
      expect(stoppedAt.task).not.toBe('rebuild-index');
      expect(page.next).toBe(encodeCursor(stoppedAt.queue, stoppedAt.id));
      const all = await clickThrough('rebuild-index', 25, 5, from);
      expect(all.flatMap((p) => p.jobs.map((j) => j.id))).toEqual(rebuilds());
    });

    it('pages a common task and a task with a state no index holds as the scan finds them', async () => {
      const sends = await clickThrough('send-2', 5_000, 50, order[order.length - 20_000]);
      expect(new Set(sends.flatMap((p) => p.jobs.map((j) => j.id))).size).toBe(order.slice(-19_999).filter((j) => j.task === 'send-2').length);
      const discarded = await inspector.jobs({ task: 'send-1', state: 'discarded', scan: 100_000, limit: 500 });
      expect(discarded.jobs.length).toBeGreaterThan(0);
      expect(discarded.jobs.every((j) => j.task === 'send-1' && j.state === 'discarded')).toBe(true);
      expect(discarded.jobs.map((j) => j.id)).toEqual(
        order
          .slice(0, 100_000)
          .filter((j) => j.task === 'send-1' && j.state === 'discarded')
          .slice(0, 500)
          .map((j) => j.id),
      );
    });

    it('refuses a budget or a cursor that is not valid, and leaves indexed filters unbounded', async () => {
      for (const scan of ['lots', '0', '-5', '2.5', '100001', 0, 100_001]) {
        await expect(inspector.jobs({ task: 'rebuild-index', scan })).rejects.toThrow(InspectorInputError);
      }
      await expect(inspector.jobs({ task: 'rebuild-index', scan: 'lots' })).rejects.toThrow(/scan is how many jobs .* from 1 to 100,000; got "lots"/);
      await expect(inspector.jobs({ task: 'rebuild-index', after: 'garbage' })).rejects.toThrow(/page cursor/);
      // A queue has its partition: the task within it pages as before, with no scan.
      const inMail = await inspector.jobs({ queue: 'mail', task: 'rebuild-index', limit: 20 });
      expect(inMail.scan).toBeUndefined();
      expect(inMail.jobs.map((j) => j.id)).toEqual(rebuilds());
    });
  });

  it('counts only from the counters table, and schedules by their key', async () => {
    expect((await plan(QUEUE_COUNTS.text)).json).not.toMatch(/stampeded_jobs/);
    expect((await plan(SCHEDULES.text)).json).not.toMatch(/stampeded_jobs/);
  });
});
