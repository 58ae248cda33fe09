import { InvalidJobError } from '../errors/stampeded.errors.js';
import type { JobColumnDefaults } from './job-column-defaults.js';
import {
  buildJobRow,
  describe as describeValue,
  fromStoredDedupScope,
  toJsonObject,
  toStoredDedupScope,
  validateJobOptions,
  validateQueueName,
  validateTaskName,
  withRuntimeMetaKey,
} from './job-input.validator.js';

const WHERE = "enqueue('send')";

/** Distinct from every option below, so that a test sees which layer a value came from. */
const COLUMNS: JobColumnDefaults = {
  priority: 0,
  expireSeconds: 300,
  maxAttempts: 25,
  backoffBaseMs: 1000,
  backoffMaxMs: 3_600_000,
  maxInterruptions: 3,
  maxDeferrals: 100,
};

const row = (options: Parameters<typeof buildJobRow>[3] = {}, defaults: Parameters<typeof buildJobRow>[4] = [], args: unknown = {}) =>
  buildJobRow(WHERE, 'send', args, options, defaults, COLUMNS);

/** The message of what `fn` throws, checked to be an InvalidJobError. */
function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidJobError);
    return (err as Error).message;
  }
  throw new Error('expected a refusal, and nothing was thrown');
}

describe('buildJobRow: where each value comes from', () => {
  it('takes the jobs table column defaults when nothing is set', () => {
    expect(row()).toEqual({
      queue: 'default',
      task: 'send',
      args: '{}',
      meta: '{}',
      tenant_id: null,
      priority: 0,
      destination: null,
      run_at: null,
      delay_ms: null,
      expire_seconds: 300,
      max_attempts: 25,
      backoff_base_ms: 1000,
      backoff_base_wide_ms: null,
      backoff_max_ms: 3_600_000,
      max_interruptions: 3,
      max_deferrals: 100,
      dedup_scope: null,
      dedup_period: null,
      dead_letter_queue: null,
      remove_on_complete: false,
      ordering_key: null,
    });
  });

  it('layers module, queue and task defaults under the enqueue, the last layer set winning', () => {
    const module = { maxAttempts: 5, priority: 1, queue: 'from-module' };
    const queue = { maxAttempts: 6, expireSeconds: 60 };
    const task = { maxAttempts: 7, queue: 'from-task' };
    expect(row({}, [module, queue, task])).toMatchObject({ queue: 'from-task', max_attempts: 7, priority: 1, expire_seconds: 60 });
    expect(row({ maxAttempts: 8, queue: 'from-enqueue' }, [module, queue, task])).toMatchObject({ queue: 'from-enqueue', max_attempts: 8 });
  });

  it('merges backoff field by field across the layers, and skips values left undefined', () => {
    const r = row({ backoff: { maxMs: 9000 }, priority: undefined }, [{ backoff: { baseMs: 50 }, priority: 4 }]);
    expect(r).toMatchObject({ backoff_base_ms: 50, backoff_max_ms: 9000, priority: 4 });
  });

  it('stores a backoff base of up to 32767 ms in backoff_base_ms alone, and a longer one whole in backoff_base_wide_ms', () => {
    expect(row({ backoff: { baseMs: 32767 } })).toMatchObject({ backoff_base_ms: 32767, backoff_base_wide_ms: null });
    expect(row({ backoff: { baseMs: 32768 } })).toMatchObject({ backoff_base_ms: 32767, backoff_base_wide_ms: 32768 });
    expect(row({ backoff: { baseMs: 60_000 } })).toMatchObject({ backoff_base_ms: 32767, backoff_base_wide_ms: 60_000 });
    expect(row({ backoff: { baseMs: 2147483647 } })).toMatchObject({ backoff_base_ms: 32767, backoff_base_wide_ms: 2147483647 });
  });

  it('stores runAt as ISO text and delayMs as given', () => {
    expect(row({ runAt: new Date('2030-01-02T03:04:05Z') }).run_at).toBe('2030-01-02T03:04:05.000Z');
    expect(row({ delayMs: 1500 }).delay_ms).toBe(1500);
  });

  it("writes meta under this runtime's own key", () => {
    expect(row({ meta: { traceId: 'abc' } }).meta).toBe('{"nestjs":{"traceId":"abc"}}');
  });

  it('stores a dedup scope with its backslashes doubled, and the period as given', () => {
    expect(row({ dedup: { scope: 'user\\42', period: 'day' } })).toMatchObject({ dedup_scope: 'user\\\\42', dedup_period: 'day' });
    expect(row({ dedup: { scope: 'welcome:42' } })).toMatchObject({ dedup_scope: 'welcome:42', dedup_period: null });
  });
});

describe('buildJobRow: what it refuses, and how it says so', () => {
  it('runAt and delayMs together', () => {
    expect(refusal(() => row({ runAt: new Date(), delayMs: 5 }))).toBe(`${WHERE}: runAt and delayMs cannot both be set; pick one.`);
  });

  it('a runAt that is not a valid Date, or past year 9999', () => {
    expect(refusal(() => row({ runAt: '2030-01-01' as never }))).toMatch(/runAt must be a valid Date, got "2030-01-01"/);
    expect(refusal(() => row({ runAt: new Date('nope') }))).toMatch(/runAt must be a valid Date/);
    expect(refusal(() => row({ runAt: new Date('+010000-01-01T00:00:00Z') }))).toMatch(/runAt must be a date from year 1 to 9999, got \+010000-01-01/);
  });

  it('a negative or infinite delayMs', () => {
    expect(refusal(() => row({ delayMs: -1 }))).toMatch(/delayMs must be a finite number of milliseconds, 0 or more, got -1/);
    expect(refusal(() => row({ delayMs: Infinity }))).toMatch(/got Infinity/);
  });

  it("a dead-letter queue that is the job's own queue, wherever the two were set", () => {
    expect(refusal(() => row({ deadLetterQueue: 'default' }))).toMatch(/deadLetterQueue is the job's own queue "default"/);
    expect(refusal(() => row({ queue: 'mail' }, [{ deadLetterQueue: 'mail' }]))).toMatch(/own queue "mail"/);
  });

  it('an unknown dedup period or option, and an empty scope', () => {
    expect(refusal(() => row({ dedup: { scope: 's', period: 'year' as never } }))).toMatch(
      /dedup\.period must be one of minute, hour, day, week, month, got "year"/,
    );
    expect(refusal(() => row({ dedup: { scope: 's', window: 'day' } as never }))).toMatch(
      /dedup: unknown option "window"\. Allowed: scope, period, mode, delayMs, maxDelayMs\./,
    );
    expect(refusal(() => row({ dedup: { scope: '' } }))).toMatch(/dedup\.scope must be a non-empty string/);
  });

  it('a dedup mode that does not exist, or delays that do not go with it', () => {
    expect(refusal(() => row({ dedup: { scope: 's', mode: 'merge' as never } }))).toMatch(/dedup\.mode must be one of keep, replace, extend, got "merge"/);
    expect(refusal(() => row({ dedup: { scope: 's', mode: 'replace', delayMs: 5 } }))).toMatch(/dedup\.delayMs is only read with mode 'extend'/);
    expect(refusal(() => row({ dedup: { scope: 's', maxDelayMs: 5 } }))).toMatch(/dedup\.maxDelayMs is only read with mode 'extend' \(mode is 'keep'\)/);
    expect(refusal(() => row({ dedup: { scope: 's', mode: 'extend' } }))).toMatch(/dedup\.delayMs is needed with mode 'extend'/);
    expect(refusal(() => row({ delayMs: 5, dedup: { scope: 's', mode: 'extend', delayMs: 5 } }))).toMatch(/delayMs cannot be set with dedup mode 'extend'/);
    expect(refusal(() => row({ dedup: { scope: 's', mode: 'extend', delayMs: -1 } }))).toMatch(/dedup\.delayMs must be a finite number of milliseconds/);
    expect(refusal(() => row({ dedup: { scope: 's', mode: 'extend', delayMs: 10, maxDelayMs: 5 } }))).toMatch(
      /dedup\.maxDelayMs must be at least dedup\.delayMs \(10\), got 5/,
    );
  });

  it("an ordering key beside a debouncing dedup mode, whose follow-up waits outside every key's order", () => {
    expect(refusal(() => row({ orderingKey: 'k', dedup: { scope: 's', mode: 'replace' } }))).toMatch(/orderingKey cannot be set with dedup mode 'replace'/);
    expect(row({ orderingKey: 'k', dedup: { scope: 's', mode: 'keep' } })).toMatchObject({ ordering_key: 'k' });
  });

  it('a debouncing dedup mode on the row, and extend as its delay; keep as no mode at all', () => {
    expect(row({ dedup: { scope: 's', mode: 'keep' } }).debounce).toBeUndefined();
    expect(row({ dedup: { scope: 's', mode: 'replace' } })).toMatchObject({ debounce: { mode: 'replace', maxDelayMs: null }, delay_ms: null });
    expect(row({ dedup: { scope: 's', mode: 'extend', delayMs: 500, maxDelayMs: 5000 } })).toMatchObject({
      debounce: { mode: 'extend', maxDelayMs: 5000 },
      delay_ms: 500,
    });
  });

  it('an empty tenant or destination, and one with a NUL', () => {
    expect(refusal(() => row({ tenantId: '' }))).toMatch(/tenantId must be a non-empty string, got ""/);
    expect(refusal(() => row({ destination: 'a\u0000b' }))).toMatch(/destination contains a NUL character/);
    expect(refusal(() => row({ tenantId: 'x'.repeat(1001) }))).toMatch(/tenantId must be at most 1000 characters, got 1001/);
  });

  it('an empty task name', () => {
    expect(refusal(() => buildJobRow(WHERE, '', {}, {}, [], COLUMNS))).toMatch(/task must be a non-empty string/);
    expect(refusal(() => validateTaskName('@Task()', 'name', 42))).toBe('@Task(): name must be a non-empty string, got 42.');
  });

  it('a queue name from a default layer that is not a valid name', () => {
    expect(refusal(() => row({}, [{ queue: 'has space' }]))).toMatch(/queue must be 1 to 48 characters/);
  });
});

describe('validateJobOptions', () => {
  it('accepts nothing, and every option at the limits of its column', () => {
    expect(validateJobOptions(WHERE, undefined)).toEqual({});
    const options = {
      queue: 'q',
      priority: -32768,
      maxAttempts: 32767,
      expireSeconds: 2147483647,
      backoff: { baseMs: 32767, maxMs: 2147483647 },
      maxInterruptions: 0,
      maxDeferrals: 0,
      deadLetterQueue: 'dead',
      removeOnComplete: true,
    };
    expect(validateJobOptions(WHERE, options)).toBe(options);
  });

  it.each([
    [{ priority: 32768 }, 'priority must be an integer from -32768 to 32767 (the smallint priority column), got 32768'],
    [{ priority: 1.5 }, 'priority must be an integer from -32768 to 32767 (the smallint priority column), got 1.5'],
    [{ maxAttempts: 0 }, 'maxAttempts must be an integer from 1 to 32767 (the smallint max_attempts column), got 0'],
    [{ expireSeconds: '60' }, 'expireSeconds must be an integer from 1 to 2147483647 (the integer expire_seconds column), got "60"'],
    [{ maxInterruptions: -1 }, 'maxInterruptions must be an integer from 0 to 32767 (the smallint max_interruptions column), got -1'],
    [{ backoff: { baseMs: 2147483648 } }, 'backoff.baseMs must be an integer from 1 to 2147483647 (the integer backoff_base_wide_ms column), got 2147483648'],
    [{ removeOnComplete: 'yes' }, 'removeOnComplete must be true or false, got "yes"'],
  ])('refuses %j, naming the column', (options, message) => {
    expect(refusal(() => validateJobOptions(WHERE, options as never))).toBe(`${WHERE}: ${message}.`);
  });

  it('refuses unknown options, listing the allowed ones', () => {
    expect(refusal(() => validateJobOptions(WHERE, { maxAttempt: 3 } as never))).toBe(
      `${WHERE}: unknown option "maxAttempt". Allowed: queue, priority, maxAttempts, expireSeconds, backoff, maxInterruptions, maxDeferrals, deadLetterQueue, removeOnComplete.`,
    );
    expect(refusal(() => validateJobOptions(WHERE, { backoff: { base: 1 } } as never))).toMatch(/backoff: unknown option "base"\. Allowed: baseMs, maxMs\./);
    expect(refusal(() => validateJobOptions(WHERE, { runAt: new Date() } as never))).toMatch(/unknown option "runAt"/);
  });

  it('refuses options that are not an object', () => {
    expect(refusal(() => validateJobOptions(WHERE, 3 as never))).toBe(`${WHERE}: options must be an object, got 3.`);
    expect(refusal(() => validateJobOptions(WHERE, { backoff: 100 } as never))).toMatch(/backoff must be an object \{ baseMs\?, maxMs\? \}/);
  });
});

describe('validateQueueName', () => {
  it.each(['default', 'a', 'mail.outbound:eu-west_1', '9lives', 'q'.repeat(48)])('accepts %s', (name) => {
    expect(validateQueueName(WHERE, 'queue', name)).toBe(name);
  });

  it.each(['', '-leading', '.leading', 'has space', 'slash/ed', 'ünïcode', 'q'.repeat(49)])('refuses %j', (name) => {
    expect(() => validateQueueName(WHERE, 'queue', name)).toThrow(InvalidJobError);
  });

  it('says what a name may be, and why', () => {
    expect(refusal(() => validateQueueName(WHERE, 'deadLetterQueue', 'a b'))).toBe(
      `${WHERE}: deadLetterQueue must be 1 to 48 characters of letters, digits, "_", ".", ":" or "-", starting with a letter or digit ` +
        `(it names a Postgres partition, whose name is limited to 63 bytes), got "a b".`,
    );
    expect(refusal(() => validateQueueName(WHERE, 'queue', null))).toBe(`${WHERE}: queue must be a non-empty string, got null.`);
  });
});

describe('toJsonObject', () => {
  it('serialises a plain object, from any prototype-less realm too; nothing is {}', () => {
    expect(toJsonObject(WHERE, 'args', { to: 'a@b.c', n: [1, 2] }, 1000)).toBe('{"to":"a@b.c","n":[1,2]}');
    expect(toJsonObject(WHERE, 'args', Object.assign(Object.create(null), { a: 1 }), 1000)).toBe('{"a":1}');
    expect(toJsonObject(WHERE, 'args', undefined, 1000)).toBe('{}');
  });

  it('drops undefined and functions, as JSON.stringify does, and keeps Dates', () => {
    expect(toJsonObject(WHERE, 'args', { a: undefined, f: () => 1, at: new Date('2030-01-01T00:00:00Z') }, 1000)).toBe('{"at":"2030-01-01T00:00:00.000Z"}');
  });

  it.each([
    [[1, 2], 'args must be a plain JSON object (named arguments), got an array; wrap it: { value: ... }'],
    ['text', 'args must be a plain JSON object (named arguments), got "text"; wrap it: { value: ... }'],
    [null, 'args must be a plain JSON object (named arguments), got null; wrap it: { value: ... }'],
    [new Map(), 'args must be a plain JSON object, got an instance of Map; pass its fields instead'],
    [{ a: { b: 'x\u0000y' } }, 'args.a.b contains a NUL character or an unpaired surrogate, which PostgreSQL jsonb cannot store'],
    [{ s: '\uD800' }, 'args.s contains a NUL character or an unpaired surrogate, which PostgreSQL jsonb cannot store'],
    [{ list: [1, NaN] }, 'args.list[1] is NaN, which JSON cannot represent'],
    [{ n: Infinity }, 'args.n is Infinity, which JSON cannot represent'],
    [{ id: 10n }, 'args.id is a bigint, which JSON cannot represent; convert it (a bigint to a string, say)'],
    [{ 'k\u0000': 1 }, 'args key "k\\u0000" cannot be stored by PostgreSQL jsonb'],
  ])('refuses %p, naming the path', (value, message) => {
    expect(refusal(() => toJsonObject(WHERE, 'args', value, 1000))).toBe(`${WHERE}: ${message}.`);
  });

  it('refuses a cycle, and accepts the same object twice side by side', () => {
    const shared = { x: 1 };
    expect(toJsonObject(WHERE, 'args', { a: shared, b: shared }, 1000)).toBe('{"a":{"x":1},"b":{"x":1}}');
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(refusal(() => toJsonObject(WHERE, 'args', cyclic, 1000))).toMatch(/args\.self refers to itself \(a cycle\)/);
  });

  it('accepts 64 levels of nesting and refuses 65', () => {
    const nest = (levels: number) => {
      let value: Record<string, unknown> = {};
      for (let i = 0; i < levels; i++) value = { v: value };
      return value;
    };
    expect(() => toJsonObject(WHERE, 'args', nest(64), 10_000)).not.toThrow();
    expect(refusal(() => toJsonObject(WHERE, 'args', nest(65), 10_000))).toMatch(/is nested more than 64 levels deep; flatten it/);
  });

  it('counts the size in UTF-8 bytes, not characters', () => {
    // {"s":"éé"} is 10 characters and 12 bytes.
    expect(toJsonObject(WHERE, 'args', { s: 'éé' }, 12)).toBe('{"s":"éé"}');
    expect(refusal(() => toJsonObject(WHERE, 'args', { s: 'éé' }, 11))).toBe(
      `${WHERE}: args is 12 bytes as JSON, over the 11-byte limit; store large payloads elsewhere and pass a reference.`,
    );
  });
});

describe('describe', () => {
  it('quotes a value short', () => {
    expect(describeValue('abc')).toBe('"abc"');
    expect(describeValue('x'.repeat(61))).toBe(`"${'x'.repeat(60)}…"`);
    expect(describeValue(7)).toBe('7');
    expect(describeValue(false)).toBe('false');
    expect(describeValue(undefined)).toBe('undefined');
    expect(describeValue(null)).toBe('null');
    expect(describeValue([1])).toBe('an array');
    expect(describeValue({})).toBe('object');
  });
});

describe('withRuntimeMetaKey', () => {
  it("adds a key of this runtime's own beside the user's, which stay after it", () => {
    expect(withRuntimeMetaKey('{}', 'trace', '{"id":1}')).toBe('{"nestjs":{"trace":{"id":1}}}');
    expect(withRuntimeMetaKey('{"nestjs":{"user":true}}', 'trace', '1')).toBe('{"nestjs":{"trace":1,"user":true}}');
    expect(withRuntimeMetaKey('{"nestjs":{}}', 'trace', '1')).toBe('{"nestjs":{"trace":1}}');
  });

  it('refuses meta that buildJobRow did not write', () => {
    expect(() => withRuntimeMetaKey('{"other":{}}', 'trace', '1')).toThrow(/meta is not as buildJobRow writes it/);
  });
});

describe('stored dedup scopes', () => {
  it.each(['plain', 'back\\slash', '\\x41', 'two\\\\in a row', ''])('round-trips %j', (scope) => {
    expect(fromStoredDedupScope(toStoredDedupScope(scope))).toBe(scope);
  });

  it('leaves a scope without a backslash as it is, and null as null', () => {
    expect(toStoredDedupScope('welcome:42')).toBe('welcome:42');
    expect(fromStoredDedupScope(null)).toBeNull();
  });
});
