import type { INestApplicationContext } from '@nestjs/common';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { StampededInspector } from '@stampeded/dashboard/inspector';
import { MaintenanceService, QueueService } from '@stampeded/nestjs';
import { ORDERING_TO_BACK } from '@stampeded/nestjs/internal';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';
import type { TestDatabase } from '@stampeded/testing';

// Per-key ordering's waiting jobs (migration 14): a keyed job behind an
// unfinished job of its key waits in 'pending', outside the claim index,
// and the outcome of the job ahead releases it. Each outcome path is driven
// here by its SQL function, on rows set up in the state it meets, and the
// test reads what PostgreSQL holds afterwards.
describe('per-key ordering: jobs wait for their turn outside the claim index', () => {
  let db: TestDatabase;
  let sql: pg.Client;
  let app: INestApplicationContext;
  let queue: QueueService;
  const worker = '00000000-0000-4000-8000-00000000a001';
  let seq = 0;
  /** Ids in increasing order, as the enqueue draws them: a job's place in its key's order is its id. */
  const nextId = () => `0190d000-0000-7000-8000-${(++seq).toString(16).padStart(12, '0')}`;

  beforeAll(async () => {
    db = await testDatabase();
    app = await bootApp(db.url, { stampeded: { worker: { enabled: false }, maintenance: { enabled: false } } });
    queue = app.get(QueueService);
    sql = await sqlClient(db.url);
  });

  afterAll(async () => {
    await app?.close();
    await sql?.end();
    await db?.drop();
  });

  type Setup = 'executing' | 'available' | 'retryable' | 'pending';
  /** A key's jobs as rows in the given states, in their key's order; an executing job is held by `worker` at attempt 1 of maxAttempts. */
  const line = async (key: string, states: Setup[], maxAttempts = 3): Promise<string[]> => {
    const ids = states.map(() => nextId());
    for (const [i, state] of states.entries()) {
      const running = state === 'executing';
      await sql.query(
        `INSERT INTO stampeded_jobs (id, queue, task, ordering_key, ordering_position, state, attempt, max_attempts,
                                     claimed_by, claimed_at, heartbeat_at, failure_kind)
         VALUES ($1, 'lines', 'noop', $2, $1, $3, $4, $5, $6, $7, $7, $8)`,
        [
          ids[i],
          key,
          state,
          running || state === 'retryable' ? 1 : 0,
          maxAttempts,
          running ? worker : null,
          running ? new Date() : null,
          state === 'retryable' ? 'raised' : null,
        ],
      );
    }
    return ids;
  };
  const statesOf = async (ids: string[]): Promise<string[]> => {
    const { rows } = await sql.query<{ id: string; state: string }>(`SELECT id::text, state FROM stampeded_jobs WHERE id = ANY($1::uuid[])`, [ids]);
    const byId = new Map(rows.map((r) => [r.id, r.state]));
    return ids.map((id) => byId.get(id) ?? 'gone');
  };

  it('enqueues a keyed job behind an unfinished one as pending, which no claim sees, and claims only the head', async () => {
    const hot = await queue.enqueueMany(Array.from({ length: 5 }, (_, n) => ({ task: 'noop', args: { n }, options: { queue: 'enq', orderingKey: 'hot' } })));
    const single = await queue.enqueue('noop', {}, { queue: 'enq', orderingKey: 'hot' });
    const cold = await queue.enqueue('noop', {}, { queue: 'enq', orderingKey: 'cold' });
    const plain = await queue.enqueue('noop', {}, { queue: 'enq' });
    // Deduplicated enqueues choose the state the same way.
    const deduped = await queue.enqueue('noop', {}, { queue: 'enq', orderingKey: 'hot', dedup: { scope: 'once' } });

    const ids = [...hot.map((j) => j.id), single.id, deduped.id];
    expect(await statesOf(ids)).toEqual(['available', 'pending', 'pending', 'pending', 'pending', 'pending', 'pending']);
    expect(await statesOf([cold.id, plain.id])).toEqual(['available', 'available']);
    // Key-waiting, not dependency-waiting.
    expect((await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE queue = 'enq' AND deps_pending IS NOT NULL`)).rows[0].n).toBe(0);
    // The claim index holds available and retryable rows only: the waiting jobs have no entry in it.
    const { rows: predicate } = await sql.query(
      `SELECT pg_get_expr(i.indpred, i.indrelid) AS pred FROM pg_index i WHERE i.indexrelid = 'stampeded_jobs_claim_idx'::regclass`,
    );
    expect(predicate[0].pred).toMatch(/available/);
    expect(predicate[0].pred).not.toMatch(/pending/);
    expect((await queue.counts('enq')).pending).toBe(6);

    const claimed = await sql.query(`SELECT id::text FROM stampeded_claim_batch('enq', $1, 100)`, [worker]);
    expect(claimed.rows.map((r) => r.id).sort()).toEqual([hot[0].id, cold.id, plain.id].sort());

    // Its completion releases the next job of the key, and that one only.
    await sql.query(`SELECT * FROM stampeded_complete_many($1, $2::text[], $3::uuid[], $4::smallint[])`, [
      worker,
      ['enq', 'enq', 'enq'],
      [hot[0].id, cold.id, plain.id],
      [1, 1, 1],
    ]);
    expect(await statesOf(ids)).toEqual(['completed', 'available', 'pending', 'pending', 'pending', 'pending', 'pending']);
    expect((await queue.counts('enq')).pending).toBe(5);
    const next = await sql.query(`SELECT id::text FROM stampeded_claim_batch('enq', $1, 100)`, [worker]);
    expect(next.rows).toEqual([{ id: hot[1].id }]);
  });

  it('releases the next job once on every path that ends a job, and not when the job keeps its place', async () => {
    const complete = (id: string) => sql.query(`SELECT * FROM stampeded_complete_many($1, ARRAY['lines'], ARRAY[$2::uuid], ARRAY[1::smallint])`, [worker, id]);
    const fail = (id: string) => sql.query(`SELECT * FROM stampeded_fail('lines', $1, $2, 1::smallint, 'raised', 'boom', 100)`, [id, worker]);

    let ids = await line('by-completion', ['executing', 'pending', 'pending']);
    await complete(ids[0]);
    expect(await statesOf(ids)).toEqual(['completed', 'available', 'pending']);

    // The seed's completion, which other runtimes call.
    ids = await line('by-seed-completion', ['executing', 'pending', 'pending']);
    await sql.query(`SELECT * FROM stampeded_complete('lines', $1, $2, 1::smallint)`, [ids[0], worker]);
    expect(await statesOf(ids)).toEqual(['completed', 'available', 'pending']);

    // Out of attempts: discarded.
    ids = await line('by-discard', ['executing', 'pending', 'pending'], 1);
    await fail(ids[0]);
    expect(await statesOf(ids)).toEqual(['discarded', 'available', 'pending']);

    // A retry that keeps its place holds its key's order...
    ids = await line('by-retry', ['executing', 'pending', 'pending'], 3);
    await fail(ids[0]);
    expect(await statesOf(ids)).toEqual(['retryable', 'pending', 'pending']);
    // ...until it goes to the back (ordering: { retryKeepsPlace: false }): the next job is the head.
    const back = nextId();
    await sql.query(ORDERING_TO_BACK.text, ['lines', ids[0], 1, back]);
    expect(await statesOf(ids)).toEqual(['retryable', 'available', 'pending']);
    expect((await sql.query(`SELECT ordering_position::text AS p FROM stampeded_jobs WHERE id = $1`, [ids[0]])).rows[0].p).toBe(back);

    // Cancelled while it runs.
    ids = await line('by-cancel', ['executing', 'pending', 'pending']);
    await sql.query(`SELECT * FROM stampeded_cancel($1)`, [ids[0]]);
    expect(await statesOf(ids)).toEqual(['cancelled', 'available', 'pending']);

    // A waiting job cancelled behind a running one releases nothing; the running one's outcome then releases the job after it.
    ids = await line('cancel-waiting', ['executing', 'pending', 'pending']);
    await sql.query(`SELECT * FROM stampeded_cancel($1)`, [ids[1]]);
    expect(await statesOf(ids)).toEqual(['executing', 'cancelled', 'pending']);
    await complete(ids[0]);
    expect(await statesOf(ids)).toEqual(['completed', 'cancelled', 'available']);

    // The expirer: past expire_seconds without a touch, at its last attempt.
    ids = await line('by-expiry', ['executing', 'pending', 'pending'], 1);
    await sql.query(`UPDATE stampeded_jobs SET expire_seconds = 1, heartbeat_at = now() - interval '1 hour' WHERE id = $1`, [ids[0]]);
    await sql.query(`SELECT * FROM stampeded_expire(100)`);
    expect(await statesOf(ids)).toEqual(['discarded', 'available', 'pending']);

    // The dashboard's discard of a job waiting for its time, one at a time and in bulk.
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    try {
      const inspector = new StampededInspector({ schema: 'public', query: async (statement, values) => (await pool.query(statement.text, values)).rows });
      ids = await line('by-dashboard', ['available', 'pending', 'pending']);
      expect(await inspector.discard(ids[0], 'lines')).toMatchObject({ previousState: 'available', state: 'discarded' });
      expect(await statesOf(ids)).toEqual(['discarded', 'available', 'pending']);
      const bulk = await line('by-dashboard-bulk', ['available', 'pending']);
      await sql.query(`UPDATE stampeded_jobs SET tenant_id = 'bulk' WHERE id = $1`, [bulk[0]]);
      expect(await inspector.bulk('discard', { queue: 'lines', tenant: 'bulk' })).toMatchObject({ changed: 1 });
      expect(await statesOf(bulk)).toEqual(['discarded', 'available']);
    } finally {
      await pool.end();
    }

    // The reaper: a job whose worker is gone, at its last attempt.
    ids = await line('by-reaper', ['executing', 'pending', 'pending'], 1);
    await sql.query(`UPDATE stampeded_jobs SET heartbeat_at = now() - interval '1 hour', claimed_at = now() - interval '1 hour' WHERE id = $1`, [ids[0]]);
    await sql.query(`SELECT * FROM stampeded_reap(interval '1 minute')`);
    expect(await statesOf(ids)).toEqual(['discarded', 'available', 'pending']);
  });

  it('releases the next job exactly once when two outcomes of one key land at the same moment in two connections', async () => {
    // A job that started out of turn (two enqueues raced) sits between the running one and the waiting ones.
    const ids = await line('same-moment', ['executing', 'available', 'pending', 'pending']);
    const x = await sqlClient(db.url);
    const y = await sqlClient(db.url);
    try {
      // Y cancels the available job and decides first: the running job is ahead, nothing to release.
      await y.query('BEGIN');
      await y.query(`SELECT * FROM stampeded_cancel($1)`, [ids[1]]);
      // X completes the running job while Y has not committed: its snapshot still sees Y's job available.
      await x.query('BEGIN');
      const completing = x.query(`SELECT * FROM stampeded_complete_many($1, ARRAY['lines'], ARRAY[$2::uuid], ARRAY[1::smallint])`, [worker, ids[0]]);
      // X waits for the key's lock that Y holds, and decides once Y has committed, seeing both outcomes.
      // (A completion that took no lock would be done here, having decided without Y's outcome.)
      let done = false;
      void completing.then(() => (done = true)).catch(() => {});
      await waitFor(
        async () =>
          done ||
          (await sql.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event = 'advisory' AND datname = current_database()`)).rows[0].n > 0,
        'the completion to wait for the key, or to be done',
      );
      await y.query('COMMIT');
      await completing;
      await x.query('COMMIT');
    } finally {
      await Promise.all([x.end(), y.end()]);
    }
    expect(await statesOf(ids)).toEqual(['completed', 'cancelled', 'available', 'pending']);
  });

  it('claims no job behind a waiting one of its key, in any claim', async () => {
    const [waiting, behind] = [nextId(), nextId()];
    for (const [id, state] of [
      [waiting, 'pending'],
      [behind, 'available'],
    ]) {
      await sql.query(`INSERT INTO stampeded_jobs (id, queue, task, ordering_key, ordering_position, state) VALUES ($1, 'behind', 'noop', 'k', $1, $2)`, [
        id,
        state,
      ]);
    }
    expect((await sql.query(`SELECT id FROM stampeded_claim_batch('behind', $1, 10)`, [worker])).rows).toEqual([]);
    expect((await sql.query(`SELECT id FROM stampeded_claim('behind', $1, 10)`, [worker])).rows).toEqual([]);
    expect((await sql.query(`SELECT id FROM stampeded_claim_fair('behind', $1, 10, NULL, '{}', 10)`, [worker])).rows).toEqual([]);
    const limited = await sql.query(
      `SELECT (job).id FROM stampeded_claim_limited('behind', $1, 10, NULL, '{"queue": {"behind": {"limit": 100, "ms": 1000}}}', NULL, NULL)
        WHERE (job).id IS NOT NULL`,
      [worker],
    );
    expect(limited.rows).toEqual([]);
    expect(await statesOf([waiting, behind])).toEqual(['pending', 'available']);
    // A key no outcome will release: out of the sweep's way below.
    await sql.query(`DELETE FROM stampeded_jobs WHERE queue = 'behind'`);
  });

  it("the seed's stampeded_complete releases a workflow job's dependent", async () => {
    const { jobs } = await queue.enqueueWorkflow({
      name: 'seed-completes',
      jobs: [
        { name: 'first', task: 'noop', options: { queue: 'flow' } },
        { name: 'then', task: 'noop', options: { queue: 'flow' }, dependsOn: ['first'] },
      ],
    });
    expect(await statesOf([jobs.first, jobs.then])).toEqual(['available', 'pending']);
    const claimed = await sql.query(`SELECT id::text, attempt FROM stampeded_claim('flow', $1, 10)`, [worker]);
    expect(claimed.rows).toEqual([{ id: jobs.first, attempt: 1 }]);
    expect((await sql.query(`SELECT * FROM stampeded_complete('flow', $1, $2, 1::smallint)`, [jobs.first, worker])).rows).toEqual([
      { was: 'executing', now_state: 'completed', owned: true },
    ]);
    expect(await statesOf([jobs.first, jobs.then])).toEqual(['completed', 'available']);
  });

  it('the sweep releases a job an enqueue left waiting while the job ahead finished, and leaves a key with waiting jobs alone', async () => {
    const [ahead] = await line('raced', ['executing']);
    const held = await line('held-line', ['executing', 'pending']);
    const dataSource = app.get(DataSource);
    let raced = '';
    await dataSource.transaction(async (manager) => {
      // The enqueue reads the key while the job ahead runs: it goes in waiting.
      raced = (await queue.enqueue('noop', {}, { queue: 'lines', orderingKey: 'raced', manager })).id;
      // The job ahead completes and commits before the enqueue does: its release cannot see the new job.
      await sql.query(`SELECT * FROM stampeded_complete_many($1, ARRAY['lines'], ARRAY[$2::uuid], ARRAY[1::smallint])`, [worker, ahead]);
    });
    expect(await statesOf([ahead, raced])).toEqual(['completed', 'pending']);

    const result = await app.get(MaintenanceService).run('ordering');
    expect(result).toMatchObject({ released: 1 });
    expect(await statesOf([ahead, raced])).toEqual(['completed', 'available']);
    expect(await statesOf(held)).toEqual(['executing', 'pending']);
    // Nothing left to release: a second sweep changes nothing.
    expect(await app.get(MaintenanceService).run('ordering')).toMatchObject({ released: 0 });
  });
});
