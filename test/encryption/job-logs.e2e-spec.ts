import { randomBytes } from 'node:crypto';
import { Module, type INestApplication, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type pg from 'pg';
import { QueueService, StampededModule, Task, type JobContext, type TaskHandler } from '@stampeded/nestjs';
import { StampededDashboardModule } from '@stampeded/dashboard';
import { drain, type TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase } from '../support/test-app.js';
import { cli } from '../support/cli.js';

@Task('charge-card', { queue: 'sealed-logs', encrypt: true })
class ChargeCard implements TaskHandler<{ email: string }> {
  handle(args: { email: string }, ctx: JobContext) {
    ctx.log(`charging the card of ${args.email}`);
    ctx.log(`receipt sent to ${args.email}\n"thanks"`);
  }
}
@Task('plain-step', { queue: 'sealed-logs' })
class PlainStep implements TaskHandler<{ n: number }> {
  handle(args: { n: number }, ctx: JobContext) {
    ctx.log(`step ${args.n}`);
  }
}

// The ctx.log() lines of an encrypted task hold what its args do: stored
// sealed as the args are (docs/encryption.md), opened where the app holds
// the key, and shown as "encrypted" by the dashboard and the CLI.
describe('encrypted job logs', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let dashboard: INestApplication;
  let base: string;
  let sql: pg.Client;
  const keys = { keys: { k1: randomBytes(32).toString('base64') }, current: 'k1' };

  beforeAll(async () => {
    db = await testDatabase();
    app = await bootApp(db.url, { providers: [ChargeCard, PlainStep], stampeded: { worker: { enabled: false }, encryption: keys } });
    @Module({
      imports: [
        StampededModule.forRoot({ connection: { url: db.url }, worker: { enabled: false } }),
        StampededDashboardModule.forRoot({ path: '/stampeded', auth: { username: 'ops', password: 'pw' }, refreshSeconds: 0 }),
      ],
    })
    class DashboardModule {}
    dashboard = await NestFactory.create(DashboardModule, { logger: ['error', 'warn'] });
    await dashboard.listen(0, '127.0.0.1');
    base = (await dashboard.getUrl()).replace('[::1]', '127.0.0.1');
    sql = await sqlClient(db.url);
  });

  afterAll(async () => {
    await sql?.end();
    await dashboard?.close();
    await app?.close();
    await db?.drop();
  });

  it('stores them sealed, opens them in getJob(), and shows them as encrypted with their key', async () => {
    const queue = app.get(QueueService);
    const sealed = await queue.enqueue(ChargeCard, { email: 'ada@example.com' });
    const plain = await queue.enqueue(PlainStep, { n: 7 });
    expect(await drain(app, { queue: 'sealed-logs' })).toMatchObject({ completed: 2 });

    const stored = (await sql.query(`SELECT job_id::text, message FROM stampeded_job_logs ORDER BY job_id, seq`)).rows;
    expect(stored.filter((r) => r.job_id === plain.id).map((r) => r.message)).toEqual(['step 7']);
    const lines = stored.filter((r) => r.job_id === sealed.id).map((r) => r.message as string);
    expect(lines).toHaveLength(2);
    for (const line of lines) {
      expect(line).not.toContain('ada@example.com');
      expect(JSON.parse(line)['$stampeded:enc']).toMatchObject({ v: 1, alg: 'A256GCM', kid: 'k1' });
    }

    const job = await queue.getJob(sealed.id, { logs: true });
    expect(job!.logs!.lines.map((l) => l.message)).toEqual(['charging the card of ada@example.com', 'receipt sent to ada@example.com\n"thanks"']);
    expect((await queue.getJob(plain.id, { logs: true }))!.logs!.lines.map((l) => l.message)).toEqual(['step 7']);

    const html = await (
      await fetch(`${base}/stampeded/jobs/${sealed.id}`, { headers: { authorization: `Basic ${Buffer.from('ops:pw').toString('base64')}` } })
    ).text();
    expect(html).toContain('encrypted · key k1');
    expect(html).not.toContain('ada@example.com');

    const shown = await cli(db.url, ['jobs', 'show', sealed.id]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/log: {8}\n {2}#1 \S+ encrypted \(key k1\)\n {2}#1 \S+ encrypted \(key k1\)/);
    expect(shown.stdout).not.toContain('ada@example.com');
  });
});
