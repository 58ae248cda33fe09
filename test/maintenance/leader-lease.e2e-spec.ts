import type pg from 'pg';
import { migrate } from '@stampeded/nestjs';
import { LeaderLease, StampededDatabase } from '@stampeded/nestjs/internal';
import type { TestDatabase } from '@stampeded/testing';
import { sqlClient, testDatabase, waitFor } from '../support/test-app.js';

// The maintenance leader behind a transaction-mode pooler: a lease row with a
// term (maintenance/leader-lease.ts). Run here on a direct connection, each
// candidate with a pool of its own as a process would have; the PgBouncer
// suite (test/pooler) runs it through a pooler.
describe('maintenance leader lease', () => {
  let db: TestDatabase;
  let sql: pg.Client;
  const opened: { lease: LeaderLease; database: StampededDatabase }[] = [];

  beforeAll(async () => {
    db = await testDatabase();
    await migrate(db.url);
    sql = await sqlClient(db.url);
  });

  afterEach(async () => {
    for (const { lease, database } of opened.splice(0)) {
      await lease.stop();
      await database.close();
    }
    await sql.query(`DELETE FROM stampeded_leader_leases`);
  });

  afterAll(async () => {
    await sql?.end();
    await db?.drop();
  });

  function candidate(intervalMs = 100) {
    const database = new StampededDatabase({ connectionString: db.url, max: 2 }, 'public', { session: false, prepared: false });
    const events: string[] = [];
    const lease = new LeaderLease(database, intervalMs, { onElected: () => events.push('elected'), onDeposed: (reason) => events.push(`deposed: ${reason}`) });
    opened.push({ lease, database });
    return { lease, database, events };
  }

  const row = async () => (await sql.query(`SELECT holder, term::int AS term, expires_at > now() AS live FROM stampeded_leader_leases`)).rows;

  it('has one holder at a time; a clean stop expires the lease, and the next holder has the next term', async () => {
    const first = candidate();
    first.lease.start();
    await waitFor(() => first.lease.isLeader, 'the first to lead');
    const second = candidate();
    second.lease.start();
    // Three renewals by the first, at the pace of the second's checks, each of which found the lease held.
    const renewals = new Set<string>();
    await waitFor(async () => {
      renewals.add((await sql.query(`SELECT renewed_at::text AS at FROM stampeded_leader_leases`)).rows[0].at);
      return renewals.size >= 4;
    }, 'the first to renew three times');
    expect(second.lease.isLeader).toBe(false);
    expect(second.events).toEqual([]);
    expect(await row()).toEqual([{ holder: expect.any(String), term: 1, live: true }]);

    await first.lease.stop();
    await waitFor(() => second.lease.isLeader, 'the second to take over');
    expect((await row())[0].term).toBe(2);
    expect(first.events).toEqual(['elected']);
    expect(second.events).toEqual(['elected']);
  });

  it('fences by term: a holder whose lease expired and passed to another renews nothing and steps down', async () => {
    const stale = candidate(200);
    stale.lease.start();
    await waitFor(() => stale.lease.isLeader, 'the first to lead');
    const [{ holder }] = await row();
    // As if the holder stalled past its expiry: the lease runs out under it, and another takes it.
    await sql.query(`UPDATE stampeded_leader_leases SET expires_at = now() - interval '1 second'`);
    const next = candidate(200);
    next.lease.start();
    await waitFor(() => next.lease.isLeader, 'the next to take over');
    await waitFor(() => !stale.lease.isLeader && stale.events.length === 2, 'the stale holder to step down');
    expect(stale.events[1]).toMatch(/^deposed: the lease of term 1 expired before it was renewed/);
    const [now] = await row();
    expect(now).toMatchObject({ term: 2, live: true });
    expect(now.holder).not.toBe(holder);
  });

  it('a holder that stops renewing (a dead process) is replaced once its lease expires', async () => {
    const dead = candidate();
    dead.lease.start();
    await waitFor(() => dead.lease.isLeader, 'the first to lead');
    // Its connections gone, as a killed process's are: it can renew nothing, and gives nothing up.
    await dead.database.close();
    const next = candidate();
    next.lease.start();
    await waitFor(() => next.lease.isLeader, 'the next to take over');
    await waitFor(() => !dead.lease.isLeader && dead.events.length === 2, 'the dead holder to stop trusting its lease, and say so');
    expect((await row())[0]).toMatchObject({ term: 2, live: true });
    expect(dead.events[1]).toMatch(/could not be renewed before it expired/);
  });
});
