import { getQueueServiceToken, QueueService, Task, type TaskHandler } from '@stampeded/nestjs';
import type { INestApplicationContext } from '@nestjs/common';
import { BILLING, bootTwoInstances, twoServers } from '../support/two-instances.js';
import { cli, spawnCli } from '../support/cli.js';

@Task('send-email', { queue: 'emails' })
class SendEmail implements TaskHandler {
  handle() {}
}

@Task('charge-card', { queue: 'invoices', instance: BILLING })
class ChargeCard implements TaskHandler {
  handle() {}
}

// The CLI against an app's two databases: --instance picks the one, from the variables named after it.
describe('stampeded --instance', () => {
  const servers = twoServers();
  let app: INestApplicationContext;
  let email: string;
  let charge: string;

  beforeAll(async () => {
    const off = { worker: { enabled: false } };
    app = await bootTwoInstances(servers, { providers: [SendEmail, ChargeCard], main: off, billing: off });
    email = (await app.get(QueueService).enqueue(SendEmail, {})).id;
    charge = (await app.get<string, QueueService>(getQueueServiceToken(BILLING) as string).enqueue(ChargeCard, {})).id;
  }, 60_000);
  afterAll(() => app?.close());

  const ids = (run: { json: () => { jobs: { id: string }[] } }) => run.json().jobs.map((job) => job.id);

  it('reads the instance named, from <NAME>_DATABASE_URL, and the default one without it', async () => {
    const env = { BILLING_DATABASE_URL: servers.billing.url };
    const billing = await cli(servers.main.url, ['--instance', 'billing', 'jobs', 'list', '--json'], env);
    expect(billing.code).toBe(0);
    expect(ids(billing)).toEqual([charge]);
    expect(ids(await cli(servers.main.url, ['jobs', 'list', '--json'], env))).toEqual([email]);
    expect(ids(await cli(servers.main.url, ['--instance', 'default', 'jobs', 'list', '--json'], env))).toEqual([email]);
    // STAMPEDED_INSTANCE, as a shell that works on one instance sets it once.
    expect(ids(await cli(servers.main.url, ['jobs', 'list', '--json'], { ...env, STAMPEDED_INSTANCE: 'billing' }))).toEqual([charge]);
    // --url still wins: the instance's database given by hand.
    expect(ids(await cli(undefined, ['--instance', 'billing', '--url', servers.billing.url, 'jobs', 'list', '--json']))).toEqual([charge]);
  });

  it('acts on the instance named', async () => {
    const env = { BILLING_DATABASE_URL: servers.billing.url };
    const paused = await cli(servers.main.url, ['--instance', 'billing', 'queues', 'pause', 'invoices', '--reason', 'month end'], env);
    expect(paused.code).toBe(0);
    const rows = async (sql: typeof servers.mainSql) => (await sql.query(`SELECT queue FROM stampeded_queue_policies WHERE paused`)).rows;
    expect(await rows(servers.billingSql)).toEqual([{ queue: 'invoices' }]);
    expect(await rows(servers.mainSql)).toEqual([]);
  });

  it('says which variable to set when the instance has none, as the binary exits', async () => {
    const run = await spawnCli(servers.main.url, ['--instance', 'eu-west', 'status']);
    expect(run.code).toBe(2);
    expect(run.stderr.trim()).toBe(
      'stampeded: No database given for the instance "eu-west": set EU_WEST_DATABASE_URL (the instance\'s own DATABASE_URL) or pass --url postgres://user:password@host:5432/db.',
    );
  });
});
