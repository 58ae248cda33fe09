import { StampededDatabase } from '@stampeded/nestjs/internal';
import { NotificationListener } from '@stampeded/nestjs/internal-runtime';
import type { TestDatabase } from '@stampeded/testing';
import type pg from 'pg';
import { sqlClient, testDatabase, waitFor } from '../support/test-app.js';

// The app's one LISTEN connection, shared by the worker, the job events and
// the waits, which subscribe to it at different moments of the app's start.
describe('NotificationListener', () => {
  let db: TestDatabase;
  let sql: pg.Client;
  let database: StampededDatabase;

  beforeAll(async () => {
    db = await testDatabase();
    sql = await sqlClient(db.url);
    database = new StampededDatabase({ connectionString: db.url, max: 2 }, 'public');
  });

  afterAll(async () => {
    await database?.close();
    await sql?.end();
    await db?.drop();
  });

  it('LISTENs to a subscription that comes while the connection is being made, at any moment of it, and tells it once', async () => {
    for (let delayMs = 0; delayMs < 16; delayMs++) {
      const listener = new NotificationListener(database);
      try {
        const heard: string[] = [];
        let told = 0;
        const first = listener.subscribe({ channels: { 'test.first': () => {} } });
        await new Promise((r) => setTimeout(r, delayMs));
        const second = listener.subscribe({ channels: { 'test.second': (payload) => heard.push(payload) }, onConnected: () => told++ });
        await Promise.all([first, second]);
        await sql.query(`NOTIFY "test.second", '${delayMs}'`);
        await waitFor(() => heard.includes(String(delayMs)), `the notification, subscribed ${delayMs} ms after the first`, 5000);
        expect(told).toBe(1);
      } finally {
        await listener.stop();
      }
    }
  });

  it("holds a subscription's shared lock while it lasts, and lets go of it and its channels after", async () => {
    const listener = new NotificationListener(database);
    const holders = async () =>
      (
        await sql.query(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
                          AND ((classid::int8 << 32) | objid::int8) = hashtextextended('test.lock', 0)`)
      ).rows[0].n;
    try {
      const heard: string[] = [];
      const unsubscribe = await listener.subscribe({ channels: { 'test.locked': (p) => heard.push(p) }, sharedLock: 'test.lock' });
      expect(listener.holds('test.lock')).toBe(true);
      expect(await holders()).toBe(1);
      await sql.query(`NOTIFY "test.locked", 'one'`);
      await waitFor(() => heard.length, 'the notification');
      await unsubscribe();
      expect(listener.holds('test.lock')).toBe(false);
      expect(await holders()).toBe(0);
      expect(listener.isListening('test.locked')).toBe(false);
    } finally {
      await listener.stop();
    }
  });
});
