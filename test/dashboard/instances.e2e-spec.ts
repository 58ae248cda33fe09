import { Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TerminusModule } from '@nestjs/terminus';
import { getQueueServiceToken, QueueService, Task, type TaskHandler } from '@stampeded/nestjs';
import { StampededHealthModule, StampededMetricsModule } from '@stampeded/dashboard';
import { BILLING, EachInstanceHealthController, twoInstanceImports, twoServers } from '../support/two-instances.js';
import { waitFor } from '../support/test-app.js';
import { metricSample } from '../support/metrics.js';

@Task('send-email', { queue: 'emails' })
class SendEmail implements TaskHandler {
  handle() {}
}

@Task('charge-card', { queue: 'invoices', instance: BILLING })
class ChargeCard implements TaskHandler {
  handle() {}
}

// Health and metrics of an app with two instances, each on a PostgreSQL server of its own.
describe('health and metrics of several databases', () => {
  const servers = twoServers();
  let app: INestApplication;
  let base: string;

  beforeAll(async () => {
    const leader = { maintenance: { leaderCheckIntervalMs: 100 } };
    @Module({
      imports: [
        ...twoInstanceImports(servers, { main: leader, billing: leader }),
        TerminusModule.forRoot({ logger: false }),
        StampededHealthModule,
        StampededMetricsModule.forRoot(),
      ],
      controllers: [EachInstanceHealthController],
      providers: [SendEmail, ChargeCard],
    })
    class InstancesHttpModule {}
    app = await NestFactory.create(InstancesHttpModule, { logger: false });
    await app.listen(0, '127.0.0.1');
    base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  }, 60_000);
  afterAll(() => app?.close());

  const get = async (path: string) => {
    const response = await fetch(`${base}${path}`);
    return { status: response.status, text: await response.text() };
  };

  it('labels every series with its instance', async () => {
    const orders = app.get(QueueService);
    const billing = app.get<string, QueueService>(getQueueServiceToken(BILLING) as string);
    const email = await orders.enqueue(SendEmail, {});
    const charges = await Promise.all([billing.enqueue(ChargeCard, {}), billing.enqueue(ChargeCard, {})]);
    await orders.waitFor(SendEmail, email.id, { timeoutMs: 20_000 });
    for (const charge of charges) await billing.waitFor(ChargeCard, charge.id, { timeoutMs: 20_000 });
    const { status, text } = await get('/metrics');
    expect(status).toBe(200);
    expect(metricSample(text, 'stampeded_jobs', { stampeded_instance: 'billing', queue: 'invoices', state: 'completed' })).toBe(2);
    expect(metricSample(text, 'stampeded_jobs', { stampeded_instance: 'default', queue: 'emails', state: 'completed' })).toBe(1);
    expect(metricSample(text, 'stampeded_jobs', { stampeded_instance: 'default', queue: 'invoices', state: 'completed' })).toBeUndefined();
    const outcome = { task: 'charge-card', outcome: 'completed' };
    expect(metricSample(text, 'stampeded_job_outcomes_total', { stampeded_instance: 'billing', ...outcome })).toBe(2);
    expect(metricSample(text, 'stampeded_job_outcomes_total', { stampeded_instance: 'default', ...outcome })).toBeUndefined();
    expect(metricSample(text, 'stampeded_job_outcomes_total', { stampeded_instance: 'default', task: 'send-email', outcome: 'completed' })).toBe(1);
  });

  it('reports each instance, and the one whose server is down as down while the other stays up', async () => {
    const up = await waitFor(async () => {
      const result = await get('/health');
      return result.status === 200 ? JSON.parse(result.text) : null;
    }, 'both instances healthy');
    expect(up.info).toMatchObject({ stampeded: { status: 'up' }, 'stampeded:billing': { status: 'up' } });

    await servers.server.kill('SIGKILL');
    const down = await get('/health');
    expect(down.status).toBe(503);
    const body = JSON.parse(down.text);
    expect(body.error['stampeded:billing']).toMatchObject({ status: 'down', reason: expect.stringMatching(/^database unreachable/) });
    expect(body.info.stampeded).toMatchObject({ status: 'up' });

    // The scrape goes on with the instance that answers.
    const { id } = await app.get(QueueService).enqueue(SendEmail, {});
    await app.get(QueueService).waitFor(SendEmail, id, { timeoutMs: 20_000 });
    const metrics = await get('/metrics');
    expect(metrics.status).toBe(200);
    expect(metricSample(metrics.text, 'stampeded_jobs', { stampeded_instance: 'default', queue: 'emails', state: 'completed' })).toBe(2);
    expect(metricSample(metrics.text, 'stampeded_jobs', { stampeded_instance: 'billing', queue: 'invoices' })).toBeUndefined();
  });
});
