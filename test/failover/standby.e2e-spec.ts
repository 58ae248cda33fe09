import pg from 'pg';
import { startPrimary, startStandby, type StartedPrimary, type Standby } from '../support/standby.js';
import { sqlClient, waitFor } from '../support/test-app.js';

// The harness the failover and replica-read specs build on: a row written on
// the primary reaches the standby, which refuses writes until promoted.
describe('a synchronous standby of a primary the test started', () => {
  let primary: StartedPrimary;
  let standby: Standby;
  const open: pg.Client[] = [];

  beforeAll(async () => {
    primary = await startPrimary();
    standby = await startStandby(primary, { synchronous: true });
  });

  afterAll(async () => {
    for (const client of open) await client.end().catch(() => {});
    await standby?.stop();
    await primary?.stop();
  });

  async function connect(url: string): Promise<pg.Client> {
    const client = await sqlClient(url);
    client.on('error', () => {});
    open.push(client);
    return client;
  }

  it('replays a row committed on the primary and refuses writes of its own', async () => {
    const writer = await connect(primary.url);
    await writer.query('CREATE TABLE replicated (id int PRIMARY KEY, note text)');
    await writer.query(`INSERT INTO replicated VALUES (1, 'on the primary')`);
    await standby.caughtUp();
    const reader = await connect(standby.url);
    const { rows } = await reader.query('SELECT note FROM replicated WHERE id = 1');
    expect(rows).toEqual([{ note: 'on the primary' }]);
    expect(await standby.lagBytes()).toBeGreaterThanOrEqual(0);
    expect(await standby.lagSeconds()).toBeGreaterThanOrEqual(0);
    await expect(reader.query(`INSERT INTO replicated VALUES (2, 'on the standby')`)).rejects.toMatchObject({ code: '25006' });
  });

  it('takes writes once promoted after the primary is killed, with every synchronous commit kept', async () => {
    const writer = await connect(primary.url);
    for (let id = 10; id < 60; id++) await writer.query('INSERT INTO replicated VALUES ($1, $2)', [id, 'before the crash']);
    await primary.kill('SIGKILL');
    await standby.promote();
    const promoted = await connect(standby.url);
    expect((await promoted.query('SELECT pg_is_in_recovery() AS r')).rows[0].r).toBe(false);
    const { rows } = await promoted.query<{ n: string }>(`SELECT count(*) AS n FROM replicated WHERE note = 'before the crash'`);
    expect(Number(rows[0].n)).toBe(50);
    await promoted.query(`INSERT INTO replicated VALUES (100, 'on the new primary')`);
    await waitFor(async () => (await promoted.query('SELECT 1 FROM replicated WHERE id = 100')).rowCount === 1, 'the write on the new primary');
  });
});

describe('an asynchronous standby', () => {
  let primary: StartedPrimary;
  let standby: Standby;

  beforeAll(async () => {
    primary = await startPrimary();
    standby = await startStandby(primary, { name: 'async1' });
  });

  afterAll(async () => {
    await standby?.stop();
    await primary?.stop();
  });

  it('streams without being listed as synchronous', async () => {
    const c = await sqlClient(primary.url);
    try {
      const { rows } = await c.query('SELECT application_name, sync_state FROM pg_stat_replication');
      expect(rows).toEqual([{ application_name: 'async1', sync_state: 'async' }]);
      await c.query('CREATE TABLE t (id int)');
      await c.query('INSERT INTO t VALUES (7)');
    } finally {
      await c.end();
    }
    await standby.caughtUp();
    const r = await sqlClient(standby.url);
    try {
      expect((await r.query('SELECT id FROM t')).rows).toEqual([{ id: 7 }]);
    } finally {
      await r.end();
    }
  });

  it('keeps what the primary commits while streaming is paused until it resumes', async () => {
    await standby.pauseStreaming();
    const c = await sqlClient(primary.url);
    try {
      expect((await c.query('SELECT 1 FROM pg_stat_replication')).rowCount).toBe(0);
      await c.query('INSERT INTO t VALUES (8)');
    } finally {
      await c.end();
    }
    const r = await sqlClient(standby.url);
    try {
      expect((await r.query('SELECT id FROM t ORDER BY id')).rows).toEqual([{ id: 7 }]);
      await standby.resumeStreaming();
      await standby.caughtUp();
      expect((await r.query('SELECT id FROM t ORDER BY id')).rows).toEqual([{ id: 7 }, { id: 8 }]);
    } finally {
      await r.end();
    }
  });
});
