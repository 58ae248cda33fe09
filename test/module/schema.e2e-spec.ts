import type { INestApplicationContext } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type pg from 'pg';
import { QueueService, Task, type TaskHandler } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';

@Task('in-schema', { queue: 'q' })
class InSchema implements TaskHandler<{ n: number }> {
  ran: number[] = [];
  handle(args: { n: number }) {
    this.ran.push(args.n);
  }
}

describe('the schema option', () => {
  let db: TestDatabase;
  let alpha: INestApplicationContext;
  let beta: INestApplicationContext;
  let sql: pg.Client;
  const notified: Array<{ channel: string; payload?: string }> = [];

  beforeAll(async () => {
    db = await testDatabase();
    alpha = await bootApp(db.url, { providers: [InSchema], stampeded: { schema: 'alpha', worker: { enabled: false } } });
    beta = await bootApp(db.url, { providers: [InSchema], stampeded: { schema: 'beta' } });
    sql = await sqlClient(db.url);
    sql.on('notification', (n) => notified.push({ channel: n.channel, payload: n.payload }));
    await sql.query(`LISTEN "alpha.stampeded_insert"; LISTEN "beta.stampeded_insert"`);
  });

  afterAll(async () => {
    await sql?.end();
    await alpha?.close();
    await beta?.close();
    await db?.drop();
  });

  it('keeps two installs in one database apart: jobs, counters and notifications', async () => {
    const { id } = await alpha.get(QueueService).enqueue('in-schema', { n: 1 });
    expect((await sql.query(`SELECT 1 FROM alpha.stampeded_jobs WHERE id = $1`, [id])).rowCount).toBe(1);
    expect((await sql.query(`SELECT 1 FROM beta.stampeded_jobs WHERE id = $1`, [id])).rowCount).toBe(0);
    expect((await alpha.get(QueueService).counts('q')).available).toBe(1);
    expect((await beta.get(QueueService).counts('q')).available).toBe(0);
    await waitFor(() => notified.some((n) => n.channel === 'alpha.stampeded_insert'), 'the alpha notification');
    expect(notified.filter((n) => n.channel === 'beta.stampeded_insert')).toHaveLength(0);
    // beta's worker never sees alpha's job.
    await new Promise((r) => setTimeout(r, 300));
    expect(beta.get(InSchema).ran).toEqual([]);
    expect((await sql.query(`SELECT state FROM alpha.stampeded_jobs WHERE id = $1`, [id])).rows[0].state).toBe('available');
  });

  it("enqueues inside the caller's transaction into its schema, whatever the caller's search_path", async () => {
    notified.length = 0;
    const dataSource = beta.get(DataSource);
    await dataSource.transaction(async (manager) => {
      const [{ search_path }] = await manager.query(`SHOW search_path`);
      expect(search_path).not.toContain('beta');
      await beta.get(QueueService).enqueue('in-schema', { n: 2 }, { manager });
    });
    // Counted in beta's counters and announced on beta's channel: the functions pin their own schema.
    // The notification reaches this client and the job reaches beta's worker in either order (one event loop runs both).
    await waitFor(() => beta.get(InSchema).ran.includes(2), "beta's worker to run the job");
    await waitFor(() => notified.some((n) => n.channel === 'beta.stampeded_insert'), 'the beta notification');
    expect(notified.map((n) => n.channel)).not.toContain('alpha.stampeded_insert');
    // The completion is recorded after the handler returns.
    await waitFor(async () => (await beta.get(QueueService).counts('q')).completed === 1, "beta's counters to count the job completed");
    expect((await sql.query(`SELECT count(*)::int AS n FROM pg_tables WHERE tablename = 'stampeded_queue_counts' AND schemaname = 'public'`)).rows[0].n).toBe(
      0,
    );
  });
});
