import type pg from 'pg';
import { migrate } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { sqlClient, testDatabase } from '../support/test-app.js';

// Migration 5: the queue counters are spread over slots, and stay exact
// however many connections move jobs at once; a claim locks only what it
// returns.

describe('contention (migration 5)', () => {
  let db: TestDatabase;
  const clients: pg.Client[] = [];
  let sql: pg.Client;

  beforeAll(async () => {
    db = await testDatabase();
    await migrate(db.url);
    for (let i = 0; i < 6; i++) clients.push(await sqlClient(db.url));
    sql = clients[0];
  });

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.end()));
    await db?.drop();
  });

  const worker = async () => (await sql.query(`INSERT INTO stampeded_workers (hostname, pid) VALUES ('test', 1) RETURNING id::text`)).rows[0].id as string;
  const insert = (queue: string, n: number) => sql.query(`INSERT INTO stampeded_jobs (queue, task) SELECT $1, 'x' FROM generate_series(1, $2)`, [queue, n]);
  const claim = async (client: pg.Client, queue: string, workerId: string, limit: number) =>
    (await client.query(`SELECT id::text, queue, attempt FROM stampeded_claim_batch($1, $2, $3)`, [queue, workerId, limit])).rows as {
      id: string;
      queue: string;
      attempt: number;
    }[];

  it('holds no lock on a row it did not return: the owner of a job claimed just before can complete it at once', async () => {
    await sql.query(`SELECT stampeded_create_queue('owners')`);
    await insert('owners', 20);
    const [a, b, c] = clients.slice(1, 4);
    const [wa, wb] = [await worker(), await worker()];
    const mine = await claim(a, 'owners', wa, 5);
    // b claims inside a transaction it keeps open.
    await b.query('BEGIN');
    const theirs = await claim(b, 'owners', wb, 100);
    expect(theirs).toHaveLength(15);
    // a's jobs are not locked by b's claim: a completion needs no wait.
    await c.query(`SET lock_timeout = '200ms'`);
    const done = await c.query(`SELECT id::text FROM stampeded_complete_many($1, $2::text[], $3::uuid[], $4::smallint[])`, [
      wa,
      mine.map((j) => j.queue),
      mine.map((j) => j.id),
      mine.map((j) => j.attempt),
    ]);
    expect(done.rows).toHaveLength(5);
    await b.query('COMMIT');
  });

  it('makes a transition wait for a recount under way, even one that writes a slot row the recount never saw', async () => {
    await sql.query(`SELECT stampeded_create_queue('recounted')`);
    await insert('recounted', 5);
    const slotOf = async (client: pg.Client) => (await client.query(`SELECT pg_backend_pid() % 16 AS slot`)).rows[0].slot as number;
    // A writer whose slot holds no row of the queue yet: the recount's delete could not have locked it.
    const mine = await slotOf(sql);
    let writer: pg.Client | undefined;
    for (const client of clients.slice(1)) if (!writer && (await slotOf(client)) !== mine) writer = client;
    if (!writer) throw new Error('every connection landed in one slot');
    const recounter = clients[1] === writer ? clients[2] : clients[1];
    await recounter.query('BEGIN');
    await recounter.query(`SELECT stampeded_recount_queue('recounted')`);
    const enqueue = writer.query(`INSERT INTO stampeded_jobs (queue, task) VALUES ('recounted', 'x')`);
    const waited = await Promise.race([enqueue.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(true), 300))]);
    expect(waited).toBe(true);
    await recounter.query('COMMIT');
    await enqueue;
    expect((await sql.query(`SELECT n::int FROM stampeded_queue_counts_total WHERE queue = 'recounted' AND state = 'available'`)).rows).toEqual([{ n: 6 }]);
  });

  it('keeps the counts exact with many connections claiming, completing and enqueueing at once, and a recount running through it', async () => {
    await sql.query(`SELECT stampeded_create_queue('spread')`);
    await insert('spread', 3000);
    const movers = clients.slice(1);
    const workers = await Promise.all(movers.map(() => worker()));
    // Each connection claims and completes in rounds, and enqueues more as it
    // goes, while another recounts the queue over and over.
    let moving = true;
    let recounts = 0;
    const recounting = (async () => {
      while (moving) {
        await sql.query(`SELECT stampeded_recount_queue('spread')`);
        recounts++;
      }
    })();
    await Promise.all(
      movers.map(async (client, i) => {
        for (let round = 0; round < 24; round++) {
          const jobs = await claim(client, 'spread', workers[i], 25);
          if (round % 5 === 0) await client.query(`INSERT INTO stampeded_jobs (queue, task) SELECT 'spread', 'x' FROM generate_series(1, 10)`);
          if (!jobs.length) continue;
          const half = jobs.slice(0, Math.ceil(jobs.length / 2));
          await client.query(`SELECT stampeded_complete_many($1, $2::text[], $3::uuid[], $4::smallint[])`, [
            workers[i],
            half.map((j) => j.queue),
            half.map((j) => j.id),
            half.map((j) => j.attempt),
          ]);
        }
      }),
    );
    moving = false;
    await recounting;
    expect(recounts).toBeGreaterThan(3);
    // One more claim each, with no recount after it: their deltas stay in their slots.
    await Promise.all(movers.map((client, i) => claim(client, 'spread', workers[i], 5)));
    const actual = (await sql.query(`SELECT state, count(*)::int AS n FROM stampeded_jobs WHERE queue = 'spread' GROUP BY state ORDER BY state`)).rows;
    const counted = (await sql.query(`SELECT state, n::int FROM stampeded_queue_counts_total WHERE queue = 'spread' AND n <> 0 ORDER BY state`)).rows;
    expect(counted).toEqual(actual);
    expect(actual.map((r) => r.state)).toEqual(['available', 'completed', 'executing']);
    // The counts came from more than one slot: connections did not meet on one row.
    const slots = (await sql.query(`SELECT count(DISTINCT slot)::int AS n FROM stampeded_queue_counts WHERE queue = 'spread'`)).rows[0].n;
    expect(slots).toBeGreaterThan(1);
    // A recount folds the slots back into one row per state, with the same totals.
    await sql.query(`SELECT stampeded_recount_queue('spread')`);
    expect((await sql.query(`SELECT state, n::int FROM stampeded_queue_counts_total WHERE queue = 'spread' AND n <> 0 ORDER BY state`)).rows).toEqual(actual);
    expect((await sql.query(`SELECT DISTINCT slot FROM stampeded_queue_counts WHERE queue = 'spread'`)).rows).toEqual([{ slot: 0 }]);
  });
});
