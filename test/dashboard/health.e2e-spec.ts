import { Controller, Get, Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import type pg from 'pg';
import { StampededModule, migrate } from '@stampeded/nestjs';
import { StampededDatabase } from '@stampeded/nestjs/internal';
import { StampededHealthIndicator, StampededHealthModule } from '@stampeded/dashboard';
import type { TestDatabase } from '@stampeded/testing';
import { sqlClient, testDatabase, waitFor } from '../support/test-app.js';

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly stampeded: StampededHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.stampeded.isHealthy('stampeded', { maxWaitSeconds: 60 })]);
  }
}

describe('health indicator (@nestjs/terminus)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let base: string;
  let sql: pg.Client;

  beforeAll(async () => {
    db = await testDatabase();
    @Module({
      imports: [
        StampededModule.forRoot({ connection: { url: db.url }, migrations: 'auto', worker: { enabled: false }, maintenance: { leaderCheckIntervalMs: 100 } }),
        TerminusModule.forRoot({ logger: false }),
        StampededHealthModule,
      ],
      controllers: [HealthController],
    })
    class HealthTestModule {}
    app = await NestFactory.create(HealthTestModule, { logger: ['error'] });
    await app.listen(0, '127.0.0.1');
    base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    sql = await sqlClient(db.url);
  });

  afterAll(async () => {
    await sql?.end();
    await app?.close();
    await db?.drop();
  });

  const health = async () => {
    const response = await fetch(`${base}/health`);
    return { status: response.status, body: (await response.json()) as any };
  };

  it('is up once a process leads maintenance and no queue is starved', async () => {
    const up = await waitFor(async () => {
      const result = await health();
      return result.status === 200 ? result : null;
    }, 'the maintenance leader to be elected');
    expect(up.body).toMatchObject({ status: 'ok', info: { stampeded: { status: 'up', maintenanceLeader: true, waitingSeconds: {} } } });
  });

  it('is down when the next due job of a queue has waited past the threshold, unless the queue is paused or held', async () => {
    await sql.query(`INSERT INTO stampeded_jobs (queue, task, scheduled_at) VALUES ('reports', 'build', now() - interval '10 minutes')`);
    const down = await health();
    expect(down.status).toBe(503);
    expect(down.body.error.stampeded).toMatchObject({ status: 'down', reason: expect.stringMatching(/jobs due for more than 60 s in reports/) });
    expect(down.body.error.stampeded.waitingSeconds.reports).toBeGreaterThanOrEqual(600);

    // A pause, read from its columns whatever the verdict says.
    await sql.query(`INSERT INTO stampeded_queue_policies (queue, paused, paused_by, paused_at) VALUES ('reports', true, 'test', now())`);
    expect((await health()).status).toBe(200);
    await sql.query(`UPDATE stampeded_queue_policies SET paused = false, paused_by = NULL, paused_at = NULL WHERE queue = 'reports'`);
    expect((await health()).status).toBe(503);
    // The planner's hold (at max_running) waits by intent too.
    await sql.query(`UPDATE stampeded_queue_policies SET verdict = 'hold', reason = 'max_running: test', decided_at = now() WHERE queue = 'reports'`);
    expect((await health()).status).toBe(200);
  });

  it('is down when nobody leads maintenance, and when the database does not answer', async () => {
    // The leader's lock, as seen from a database where nobody holds it.
    const other = await testDatabase();
    const lonely = new StampededDatabase({ connectionString: other.url }, 'public');
    try {
      await migrate(other.url);
      const result = await new StampededHealthIndicator(lonely).isHealthy();
      expect(result.stampeded).toMatchObject({ status: 'down', maintenanceLeader: false, reason: expect.stringMatching(/no process leads maintenance/) });
      expect((await new StampededHealthIndicator(lonely).isHealthy('stampeded', { requireMaintenanceLeader: false })).stampeded.status).toBe('up');
    } finally {
      await lonely.close();
      await other.drop();
    }
    const unreachable = new StampededDatabase({ connectionString: 'postgres://nobody:x@127.0.0.1:1/none', connectionTimeoutMillis: 2000 }, 'public');
    try {
      const result = await new StampededHealthIndicator(unreachable).isHealthy('db');
      expect(result.db).toMatchObject({ status: 'down', reason: expect.stringMatching(/^database unreachable: /) });
    } finally {
      await unreachable.close();
    }
  });
});
