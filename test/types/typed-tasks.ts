// Type-level tests of typed tasks: compiled by `npm run typecheck` (its own
// program, test/types/tsconfig.json, so that the registry declared here does
// not reach the other tests), never run. Each `@ts-expect-error` fails the
// typecheck when the line under it compiles; each expectType<Equal<A, B>>
// fails it when A is not exactly B.
import type { StandardSchemaV1 as SpecSchema } from '@standard-schema/spec';
import {
  Task,
  type ArgsOf,
  type ChunkContext,
  type ChunkJob,
  type ChunkTaskHandler,
  type Job,
  type JobContext,
  type Queue,
  type QueueService,
  type ResultOf,
  type TaskHandler,
} from '@stampeded/nestjs';

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
// eslint-disable-next-line @typescript-eslint/no-unused-vars -- the check is the type argument's constraint
function expectType<T extends true>(): void {}

interface Receipt {
  orderId: number;
  copies?: number;
}

@Task('typed:send-email')
class SendEmail implements TaskHandler<{ to: string }, { messageId: string }> {
  async handle(args: { to: string }, _ctx: JobContext): Promise<{ messageId: string }> {
    return { messageId: `<${args.to}>` };
  }
}

/** Without `implements`: the types come from handle() alone. */
@Task('typed:resize')
class Resize {
  handle(args: { width: number; height: number }): { bytes: number } {
    return { bytes: args.width * args.height };
  }
}

@Task('typed:tick')
class Tick implements TaskHandler {
  handle(): void {}
}

/** Any schema of the Standard Schema specification's own type (what zod, valibot and arktype declare) is a validate option. */
declare const specSchema: SpecSchema<{ to: string }>;
@Task('typed:validated', { validate: specSchema })
class Validated implements TaskHandler<{ to: string }> {
  handle(): void {}
}
@Task('typed:validated-by-hook', { validate: (args) => (typeof (args as { to?: unknown }).to === 'string' ? [] : [{ message: 'Required', path: ['to'] }]) })
class ValidatedByHook implements TaskHandler<{ to: string }> {
  handle(): void {}
}
// @ts-expect-error a validate option is a schema or a function
@Task('typed:badly-validated', { validate: { parse: () => ({}) } })
class BadlyValidated implements TaskHandler {
  handle(): void {}
}
void [Validated, ValidatedByHook, BadlyValidated];

/** A chunked task: its args from its jobs' type, its result from its context's. */
@Task('typed:index-products', { chunk: { size: 100, waitMs: 500 } })
class IndexProducts implements ChunkTaskHandler<{ productId: number }, { indexed: boolean }> {
  async handleChunk(jobs: ChunkJob<{ productId: number }>[], ctx: ChunkContext<{ indexed: boolean }>): Promise<void> {
    for (const job of jobs) ctx.complete(job, { indexed: job.args.productId > 0 });
    // @ts-expect-error a result of another type than the context's
    ctx.complete(jobs[0], { indexed: 'yes' });
  }
}
/** Without `implements` or a context: a result of unknown type. */
@Task('typed:bulk-mail', { chunk: { size: 10 } })
class BulkMail {
  handleChunk(jobs: ChunkJob<{ to: string }>[]): void {
    void jobs.map((job) => job.args.to);
  }
}
// @ts-expect-error a chunk option needs a handleChunk()
@Task('typed:not-chunked', { chunk: { size: 10 } })
class NotChunked {
  handle(): void {}
}
void NotChunked;

declare module '@stampeded/nestjs' {
  interface StampededTasks {
    /** A chunked task by its class. */
    'typed:index-products': IndexProducts;
    /** By the class: args and result. */
    'typed:send-email': SendEmail;
    /** By the args type: a task of another process or runtime. */
    'typed:send-receipt': Receipt;
  }
}

// ---- @Task(name) on a class, for a name StampededTasks lists: the handler takes the listed args ----
@Task('typed:send-receipt')
class SendReceipt {
  handle(args: Receipt, _ctx: JobContext): void {
    void args.orderId;
  }
}
/** A handler may take less than the listed args, or more optional ones. */
@Task('typed:send-receipt')
class SendReceiptLoosely {
  handle(args: { orderId: number; locale?: string }): void {
    void args;
  }
}
// @ts-expect-error the handler's args are not the ones StampededTasks lists for the name
@Task('typed:send-receipt')
class SendReceiptWrongly {
  handle(args: { orderId: string }): void {
    void args;
  }
}
// @ts-expect-error nor is a class without handle() a handler of a listed name
@Task('typed:send-receipt')
class NoHandle {}
void [SendReceipt, SendReceiptLoosely, SendReceiptWrongly, NoHandle];

export async function typedTasks(queue: QueueService, emails: Queue): Promise<void> {
  // ---- the types a class gives ----
  expectType<Equal<ArgsOf<typeof SendEmail>, { to: string }>>();
  expectType<Equal<ResultOf<typeof SendEmail>, { messageId: string }>>();
  expectType<Equal<ArgsOf<typeof Resize>, { width: number; height: number }>>();
  expectType<Equal<ResultOf<typeof Resize>, { bytes: number }>>();
  expectType<Equal<ResultOf<typeof Tick>, void>>();
  expectType<Equal<ArgsOf<'typed:send-email'>, { to: string }>>();
  expectType<Equal<ResultOf<'typed:send-email'>, { messageId: string }>>();
  expectType<Equal<ArgsOf<'typed:send-receipt'>, Receipt>>();
  expectType<Equal<ResultOf<'typed:send-receipt'>, unknown>>();
  expectType<Equal<ArgsOf<'not-listed'>, Record<string, unknown>>>();
  expectType<Equal<ArgsOf<typeof IndexProducts>, { productId: number }>>();
  expectType<Equal<ResultOf<typeof IndexProducts>, { indexed: boolean }>>();
  expectType<Equal<ArgsOf<'typed:index-products'>, { productId: number }>>();
  expectType<Equal<ResultOf<'typed:index-products'>, { indexed: boolean }>>();
  expectType<Equal<ArgsOf<typeof BulkMail>, { to: string }>>();
  expectType<Equal<ResultOf<typeof BulkMail>, unknown>>();

  // ---- enqueue() by class ----
  await queue.enqueue(SendEmail, { to: 'a@example.com' });
  await queue.enqueue(Resize, { width: 2, height: 3 }, { priority: 1 });
  // @ts-expect-error wrong type of an arg
  await queue.enqueue(SendEmail, { to: 42 });
  // @ts-expect-error a missing arg
  await queue.enqueue(SendEmail, {});
  // @ts-expect-error an arg the task does not take
  await queue.enqueue(SendEmail, { to: 'a@example.com', cc: 'b@example.com' });
  // @ts-expect-error args are required when the task takes some
  await queue.enqueue(Resize);
  // A chunked task's jobs are enqueued one by one, typed by its jobs' args.
  await queue.enqueue(IndexProducts, { productId: 42 });
  await queue.enqueue('typed:index-products', { productId: 42 });
  // @ts-expect-error wrong args for a chunked task
  await queue.enqueue(IndexProducts, { productId: '42' });
  await queue.enqueueMany([{ task: BulkMail, args: { to: 'a@example.com' } }]);
  // @ts-expect-error not a task class: it has no handle()
  await queue.enqueue(Receipt2, {});

  // ---- enqueue() by a name StampededTasks lists ----
  await queue.enqueue('typed:send-email', { to: 'a@example.com' });
  await queue.enqueue('typed:send-receipt', { orderId: 7 });
  await queue.enqueue('typed:send-receipt', { orderId: 7, copies: 2 }, { delayMs: 1000 });
  // @ts-expect-error wrong type of an arg, by name
  await queue.enqueue('typed:send-receipt', { orderId: '7' });
  // @ts-expect-error a missing arg, by name
  await queue.enqueue('typed:send-email', {});

  // ---- names not listed stay untyped, as before ----
  await queue.enqueue('charge-card', { orderId: 'anything', amount: 5 });
  await queue.enqueue('charge-card');
  const someName: string = 'from-config';
  await queue.enqueue(someName, { any: 'thing' });
  await queue.enqueue<{ id: number }>('old-style-generic', { id: 1 });
  // @ts-expect-error args are a JSON object, not a string
  await queue.enqueue('charge-card', 'not an object');

  // ---- enqueueMany(): each job checked against its own task ----
  await queue.enqueueMany([
    { task: SendEmail, args: { to: 'a@example.com' } },
    { task: 'typed:send-receipt', args: { orderId: 1 } },
    { task: 'charge-card', args: { amount: 1 } },
    { task: Tick, args: {}, options: { priority: 2 } },
  ]);
  // @ts-expect-error wrong args for a class
  await queue.enqueueMany([{ task: SendEmail, args: { to: 1 } }]);
  await queue.enqueueMany([
    { task: SendEmail, args: { to: 'a@example.com' } },
    // @ts-expect-error wrong args for a listed name, after a good job
    { task: 'typed:send-receipt', args: { orderId: 'x' } },
  ]);
  // An array built elsewhere, of the untyped item, as before.
  const built: { task: string; args?: Record<string, unknown> }[] = [{ task: 'charge-card', args: { amount: 1 } }];
  await queue.enqueueMany(built);

  // ---- the queue-bound handle: the same checks ----
  await emails.enqueue(SendEmail, { to: 'a@example.com' });
  await emails.enqueue('typed:send-receipt', { orderId: 1 });
  // @ts-expect-error wrong args on a queue handle
  await emails.enqueue('typed:send-receipt', { order: 1 });
  // @ts-expect-error wrong args in a batch on a queue handle
  await emails.enqueueMany([{ task: Resize, args: { width: 1 } }]);

  // ---- getJob(): typed by the task, or by hand ----
  const sent = await queue.getJob(SendEmail, '0190a0d2-0000-7000-8000-000000000000');
  expectType<Equal<typeof sent, Job<{ to: string }, { messageId: string }> | null>>();
  expectType<Equal<NonNullable<typeof sent>['result'], { messageId: string } | null>>();
  if (sent?.state === 'completed') {
    const to: string = sent.args.to;
    const messageId: string | undefined = sent.result?.messageId;
    void [to, messageId];
  }
  const _receipt = await queue.getJob('typed:send-receipt', '0190a0d2-0000-7000-8000-000000000000', { queue: 'receipts' });
  expectType<Equal<typeof _receipt, Job<Receipt, unknown> | null>>();
  const _byHand = await queue.getJob<{ width: number }, { bytes: number }>('0190a0d2-0000-7000-8000-000000000000');
  expectType<Equal<typeof _byHand, Job<{ width: number }, { bytes: number }> | null>>();
  const _untyped = await queue.getJob('0190a0d2-0000-7000-8000-000000000000');
  expectType<Equal<typeof _untyped, Job<Record<string, unknown>, unknown> | null>>();
  // ---- waitFor(): typed as getJob(), and never null ----
  const _finished = await queue.waitFor(SendEmail, '0190a0d2-0000-7000-8000-000000000000', { timeoutMs: 5000 });
  expectType<Equal<typeof _finished, Job<{ to: string }, { messageId: string }>>>();
  expectType<Equal<(typeof _finished)['result'], { messageId: string } | null>>();
  const _waitedByName = await queue.waitFor('typed:send-email', '0190a0d2-0000-7000-8000-000000000000');
  expectType<Equal<typeof _waitedByName, Job<{ to: string }, { messageId: string }>>>();
  const _waitedByHand = await queue.waitFor<{ width: number }, { bytes: number }>('0190a0d2-0000-7000-8000-000000000000', {
    signal: AbortSignal.timeout(1000),
  });
  expectType<Equal<typeof _waitedByHand, Job<{ width: number }, { bytes: number }>>>();
  const _waitedUntyped = await queue.waitFor('0190a0d2-0000-7000-8000-000000000000');
  expectType<Equal<typeof _waitedUntyped, Job<Record<string, unknown>, unknown>>>();
  // @ts-expect-error the options are an object
  await queue.waitFor(SendEmail, '0190a0d2-0000-7000-8000-000000000000', 5000);

  // An unlisted name filters by task, untyped.
  const _unlisted = await queue.getJob('charge-card', '0190a0d2-0000-7000-8000-000000000000');
  expectType<Equal<typeof _unlisted, Job<Record<string, unknown>, unknown> | null>>();
  // @ts-expect-error the options are an object
  await queue.getJob('0190a0d2-0000-7000-8000-000000000000', 42);
}

/** A class that is not a task. */
class Receipt2 {
  orderId = 1;
}
