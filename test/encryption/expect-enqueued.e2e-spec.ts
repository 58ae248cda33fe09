import { randomBytes } from 'node:crypto';
import type { INestApplicationContext } from '@nestjs/common';
import { QueueService, Task, type TaskHandler } from '@stampeded/nestjs';
import { expectEnqueued, type TestDatabase } from '@stampeded/testing';
import { bootApp, testDatabase } from '../support/test-app.js';

@Task('mail-secret', { queue: 'sealed-mail', encrypt: true })
class MailSecret implements TaskHandler<{ to: string; n: number }> {
  handle() {}
}
@Task('mail-plain', { queue: 'sealed-mail' })
class MailPlain implements TaskHandler<{ to: string; n: number }> {
  handle() {}
}

// expectEnqueued() matches the args of a job stored encrypted as it matches
// a plain one's, with the app's keys, and returns them opened.
describe('expectEnqueued() and encrypted args', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let stranger: INestApplicationContext;

  beforeAll(async () => {
    db = await testDatabase();
    const keys = { keys: { k1: randomBytes(32).toString('base64') }, current: 'k1' };
    app = await bootApp(db.url, { providers: [MailSecret, MailPlain], stampeded: { worker: { enabled: false }, encryption: keys } });
    // An app of the same database that holds another key: it cannot open these args.
    const other = { keys: { k9: randomBytes(32).toString('base64') }, current: 'k9' };
    stranger = await bootApp(db.url, { via: 'connection', stampeded: { worker: { enabled: false }, encryption: other } });
  });

  afterAll(async () => {
    await stranger?.close();
    await app?.close();
    await db?.drop();
  });

  it('matches by the plaintext args, counts, and returns the args opened', async () => {
    const queue = app.get(QueueService);
    const sealed = await queue.enqueue(MailSecret, { to: 'ada@example.com', n: 1 });
    await queue.enqueue(MailSecret, { to: 'bob@example.com', n: 2 });
    await queue.enqueue(MailPlain, { to: 'ada@example.com', n: 3 });

    const found = await expectEnqueued(app, { task: MailSecret, args: { to: 'ada@example.com' }, count: 1 });
    expect(found.map((j) => [j.id, j.args])).toEqual([[sealed.id, { to: 'ada@example.com', n: 1 }]]);
    // Sealed and plain jobs alike, in one call.
    expect((await expectEnqueued(app, { queue: 'sealed-mail', args: { to: 'ada@example.com' }, count: 2 })).map((j) => j.args.n)).toEqual([1, 3]);
    await expect(expectEnqueued(app, { task: MailSecret, args: { to: 'eve@example.com' } })).rejects.toThrow(
      /found 0[\s\S]*sealed-mail\/mail-secret {"to":"ada@example.com","n":1}/,
    );
    // Without the key there is nothing to compare: no match, and the job's args stay sealed.
    await expect(expectEnqueued(stranger, { task: 'mail-secret', args: { to: 'ada@example.com' } })).rejects.toThrow(/found 0/);
    expect((await expectEnqueued(stranger, { task: 'mail-secret', count: 2 }))[0].args).toHaveProperty(['$stampeded:enc']);
  });
});
