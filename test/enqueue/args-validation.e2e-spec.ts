import type { INestApplicationContext } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { InvalidJobError, QueueService, Task, type ArgsIssue, type StandardSchemaResult, type StandardSchemaV1, type TaskHandler } from '@stampeded/nestjs';
import type pg from 'pg';
import { drain, type TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase } from '../support/test-app.js';

interface ReceiptArgs {
  orderId: number;
  email: string;
}

/**
 * A Standard Schema object written by hand, as zod, valibot and arktype
 * write theirs: `~standard.validate` answers `{ value }` or `{ issues }`.
 */
function receiptSchema(): StandardSchemaV1<ReceiptArgs> {
  return {
    '~standard': {
      version: 1,
      vendor: 'test',
      validate(value: unknown): StandardSchemaResult<ReceiptArgs> {
        const args = (value ?? {}) as Record<string, unknown>;
        const issues: ArgsIssue[] = [];
        if (!Number.isInteger(args.orderId) || (args.orderId as number) <= 0) issues.push({ message: 'must be a positive integer', path: ['orderId'] });
        if (typeof args.email !== 'string' || !args.email.includes('@')) issues.push({ message: 'must be an email address', path: [{ key: 'email' }] });
        return issues.length ? { issues } : { value: args as unknown as ReceiptArgs };
      },
    },
  };
}

/** The same schema, answering asynchronously (a schema with an async refinement). */
function slowReceiptSchema(): StandardSchemaV1<ReceiptArgs> {
  const schema = receiptSchema();
  return {
    '~standard': { ...schema['~standard'], validate: async (value) => schema['~standard'].validate(value) },
  };
}

const handled: unknown[] = [];

@Task('send-receipt', { queue: 'receipts', deadLetterQueue: 'receipts-dead', validate: receiptSchema() })
class SendReceipt implements TaskHandler<ReceiptArgs> {
  handle(args: ReceiptArgs) {
    handled.push(args);
  }
}

@Task('send-receipt-later', { queue: 'receipts', validate: slowReceiptSchema() })
class SendReceiptLater implements TaskHandler<ReceiptArgs> {
  handle(args: ReceiptArgs) {
    handled.push(args);
  }
}

/** A validate function: issues as strings and as objects with a path. */
@Task('ship-order', {
  queue: 'receipts',
  validate: (args: unknown) => {
    const { items } = args as { items?: { sku?: unknown }[] };
    if (!Array.isArray(items) || items.length === 0) return ['items: at least one item is needed'];
    return items.flatMap((item, i) => (typeof item.sku === 'string' ? [] : [{ message: 'Required', path: ['items', i, 'sku'] }]));
  },
})
class ShipOrder implements TaskHandler<{ items: { sku: string }[] }> {
  handle(args: { items: { sku: string }[] }) {
    handled.push(args);
  }
}

/** A validate function that refuses by throwing, as a wrapped class-validator check might. */
@Task('refund', {
  queue: 'receipts',
  validate: (args: unknown) => {
    if ((args as { amount?: unknown }).amount === undefined) throw new Error('amount is required');
  },
})
class Refund implements TaskHandler<{ amount: number }> {
  handle() {}
}

/** Checks the args as they are stored and run: JSON, where a Date is a string. */
@Task('stamp', { queue: 'receipts', validate: (args: unknown) => (typeof (args as { at?: unknown }).at === 'string' ? [] : ['at: must be a string']) })
class Stamp implements TaskHandler<{ at: string }> {
  handle() {}
}

/** Not a provider of the app: an API process enqueueing for workers elsewhere still checks by the class. */
@Task('audit', { queue: 'receipts', validate: (args: unknown) => ((args as { who?: unknown }).who ? [] : ['who: required']) })
class Audit implements TaskHandler<{ who: string }> {
  handle() {}
}

describe('args validation: a task checks its args at enqueue and before it runs', () => {
  let db: TestDatabase;
  let sql: pg.Client;
  let app: INestApplicationContext;
  let queue: QueueService;

  beforeAll(async () => {
    db = await testDatabase();
    app = await bootApp(db.url, {
      providers: [SendReceipt, SendReceiptLater, ShipOrder, Refund, Stamp],
      stampeded: { worker: { enabled: false } },
    });
    queue = app.get(QueueService);
    sql = await sqlClient(db.url);
  });

  afterAll(async () => {
    await sql?.end();
    await app?.close();
    await db?.drop();
  });

  const jobCount = async () => (await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs`)).rows[0].n as number;

  /** The call's refusal, after checking that it wrote nothing. */
  async function refused(call: () => Promise<unknown>): Promise<InvalidJobError> {
    const before = await jobCount();
    const error = await call().then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(InvalidJobError);
    expect(await jobCount()).toBe(before);
    return error as InvalidJobError;
  }

  it('refuses invalid args at enqueue with the schema issues, by class and by name, and writes nothing', async () => {
    const byClass = await refused(() => queue.enqueue(SendReceipt, { orderId: -1, email: 'nobody' }));
    expect(byClass.message).toBe(
      'enqueue(): the args of task "send-receipt" fail its validate option: orderId: must be a positive integer; email: must be an email address. ' +
        'Nothing was written; fix the args.',
    );
    const byName = await refused(() => queue.enqueue('send-receipt', { orderId: 3 }));
    expect(byName.message).toMatch(/enqueue\(\): the args of task "send-receipt" fail its validate option: email: must be an email address\./);
    // An asynchronous schema refuses as well.
    const later = await refused(() => queue.enqueue(SendReceiptLater, { orderId: 1.5, email: 'a@example.com' }));
    expect(later.message).toMatch(/"send-receipt-later" fail its validate option: orderId: must be a positive integer\./);

    const { id } = await queue.enqueue(SendReceipt, { orderId: 3, email: 'ada@example.com' });
    expect((await sql.query(`SELECT args FROM stampeded_jobs WHERE id = $1`, [id])).rows[0].args).toEqual({
      orderId: 3,
      email: 'ada@example.com',
    });
  });

  it('refuses invalid args from a validate function: its issues, with their paths, or what it threw', async () => {
    const items = await refused(() => queue.enqueue('ship-order', { items: [{ sku: 'a' }, {}, { sku: 2 }] }));
    expect(items.message).toMatch(/"ship-order" fail its validate option: items\[1\]\.sku: Required; items\[2\]\.sku: Required\./);
    const empty = await refused(() => queue.enqueue('ship-order', { items: [] }));
    expect(empty.message).toMatch(/items: at least one item is needed/);
    const thrown = await refused(() => queue.enqueue('refund', {}));
    expect(thrown.message).toMatch(/"refund" fail its validate option: amount is required\./);
    await queue.enqueue('refund', { amount: 5 });
  });

  it('checks the args as JSON, as the worker will check them and the handler receive them', async () => {
    await queue.enqueue('stamp', { at: new Date() });
    await refused(() => queue.enqueue('stamp', { at: undefined }));
  });

  it('checks by the class a task this app does not provide', async () => {
    const error = await refused(() => queue.enqueue(Audit, {} as { who: string }));
    expect(error.message).toMatch(/"audit" fail its validate option: who: required/);
    await queue.enqueue(Audit, { who: 'ops' });
  });

  it('refuses a whole batch, naming the job, when one job of it is invalid, and inside a transaction writes nothing', async () => {
    const batch = await refused(() =>
      queue.enqueueMany([
        { task: SendReceipt, args: { orderId: 1, email: 'a@example.com' } },
        { task: 'ship-order', args: { items: [{ sku: 'x' }] } },
        { task: SendReceiptLater, args: { orderId: 0, email: 'a@example.com' } },
      ]),
    );
    expect(batch.message).toMatch(/^enqueueMany\(\) job #2: the args of task "send-receipt-later" fail its validate option: orderId/);

    const dataSource = app.get(DataSource);
    await refused(() =>
      dataSource.transaction(async (manager) => {
        await manager.query(`SELECT 1`);
        await queue.enqueue(SendReceipt, { orderId: 0, email: 'x' } as ReceiptArgs, { manager });
      }),
    );
  });

  it('discards a job inserted with invalid args without running it: unrecoverable, the issues in its history, dead-lettered', async () => {
    handled.length = 0;
    const {
      rows: [{ id }],
    } = await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, args, max_attempts, dead_letter_queue)
       VALUES ('inserted', 'send-receipt', '{"orderId": "42", "email": "ada@example.com"}', 25, 'receipts-dead') RETURNING id`,
    );
    const {
      rows: [{ id: valid }],
    } = await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, args) VALUES ('inserted', 'send-receipt-later', '{"orderId": 42, "email": "ada@example.com"}') RETURNING id`,
    );
    const outcome = await drain(app, { queue: 'inserted' });
    expect(outcome).toMatchObject({ completed: 1, discarded: 1, retrying: 0 });

    const { rows } = await sql.query(
      `SELECT state, attempt, failure_kind, last_error, errors -> 0 ->> 'kind' AS kind, errors -> 0 ->> 'message' AS message
         FROM stampeded_jobs WHERE id = $1`,
      [id],
    );
    expect(rows[0]).toMatchObject({ state: 'discarded', attempt: 1, failure_kind: 'unrecoverable', kind: 'unrecoverable' });
    expect(rows[0].message).toMatch(/^the args of task "send-receipt" fail its validate option: orderId: must be a positive integer\. The job was discarded/);
    expect(rows[0].last_error).toBe(rows[0].message);
    const deadLetters = await sql.query(`SELECT queue, task, args FROM stampeded_jobs WHERE source_id = $1`, [id]);
    expect(deadLetters.rows).toEqual([{ queue: 'receipts-dead', task: 'send-receipt', args: { orderId: '42', email: 'ada@example.com' } }]);

    // The handler never saw the invalid job; the valid one, checked asynchronously, ran.
    expect(handled).toEqual([{ orderId: 42, email: 'ada@example.com' }]);
    expect((await sql.query(`SELECT state FROM stampeded_jobs WHERE id = $1`, [valid])).rows[0].state).toBe('completed');
  });

  it('refuses at bootstrap a validate option that is neither a Standard Schema nor a function', async () => {
    for (const validate of [42, { validate: () => [] }, { '~standard': { version: 1 } }]) {
      @Task('badly-validated', { validate: validate as never })
      class BadlyValidated implements TaskHandler {
        handle() {}
      }
      await expect(bootApp(db.url, { providers: [BadlyValidated], stampeded: { worker: { enabled: false } } })).rejects.toThrow(
        /@Task\('badly-validated'\) on BadlyValidated: validate must be a Standard Schema \(a zod, valibot or arktype schema: an object with "~standard"\) or a function \(args\) => issues/,
      );
    }
  });
});
