import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import { InvalidJobError, QueueService, StampededConfigError, Task, migrate, type EnqueueOptions, type TaskHandler } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase } from '../support/test-app.js';

// Bad input at the edges, beyond what test/enqueue/enqueue.e2e-spec.ts covers: every
// enqueue option at its limit (accepted, and stored as given) and one past it
// (refused before anything is written); args and dedup scopes that are odd
// rather than wrong; queue names at the identifier limit. The 64 KB
// checkpoint is in worker-lifecycle, the nonsense cron in schedules.
describe('bad input', () => {
  let db: TestDatabase;
  let app: INestApplicationContext;
  let queue: QueueService;
  let sql: pg.Client;
  const jobCount = async () => (await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs`)).rows[0].n as number;

  beforeAll(async () => {
    db = await testDatabase();
    app = await bootApp(db.url, { stampeded: { worker: { enabled: false }, maintenance: { enabled: false } } });
    queue = app.get(QueueService);
    sql = await sqlClient(db.url);
  });

  afterAll(async () => {
    await sql?.end();
    await app?.close();
    await db?.drop();
  });

  async function refused(args: unknown, options: EnqueueOptions, message: RegExp, task = 'edge'): Promise<void> {
    const before = await jobCount();
    const attempt = queue.enqueue(task, args as object, options);
    await expect(attempt).rejects.toThrow(InvalidJobError);
    await expect(queue.enqueue(task, args as object, options)).rejects.toThrow(message);
    expect(await jobCount()).toBe(before);
  }

  async function stored(args: unknown, options: EnqueueOptions, task = 'edge'): Promise<Record<string, any>> {
    const { id } = await queue.enqueue(task, args as object, options);
    return (await sql.query(`SELECT * FROM stampeded_jobs WHERE id = $1`, [id])).rows[0];
  }

  describe('every option at its limit is stored as given; one past it is refused', () => {
    it.each([
      ['priority', { priority: -32768 }, { priority: 32767 }, 'priority', -32768, 32767],
      ['maxAttempts', { maxAttempts: 1 }, { maxAttempts: 32767 }, 'max_attempts', 1, 32767],
      ['expireSeconds', { expireSeconds: 1 }, { expireSeconds: 2147483647 }, 'expire_seconds', 1, 2147483647],
      ['maxInterruptions', { maxInterruptions: 0 }, { maxInterruptions: 32767 }, 'max_interruptions', 0, 32767],
      ['maxDeferrals', { maxDeferrals: 0 }, { maxDeferrals: 32767 }, 'max_deferrals', 0, 32767],
      ['backoff.baseMs', { backoff: { baseMs: 1 } }, { backoff: { baseMs: 32767 } }, 'backoff_base_ms', 1, 32767],
      ['backoff.baseMs past the smallint', { backoff: { baseMs: 32768 } }, { backoff: { baseMs: 2147483647 } }, 'backoff_base_wide_ms', 32768, 2147483647],
      ['backoff.maxMs', { backoff: { maxMs: 1 } }, { backoff: { maxMs: 2147483647 } }, 'backoff_max_ms', 1, 2147483647],
    ])('%s at both ends', async (_option, low, high, column, lowValue, highValue) => {
      expect((await stored({}, low as EnqueueOptions))[column]).toBe(lowValue);
      expect((await stored({}, high as EnqueueOptions))[column]).toBe(highValue);
    });

    it.each([
      [{ priority: -32769 }, /priority must be an integer from -32768 to 32767/],
      [{ priority: 32768 }, /priority must be an integer from -32768 to 32767/],
      [{ priority: 1.5 }, /priority must be an integer/],
      [{ priority: Number.NaN }, /priority must be an integer/],
      [{ priority: '1' }, /priority must be an integer/],
      [{ maxAttempts: 32768 }, /maxAttempts must be an integer from 1 to 32767/],
      [{ expireSeconds: 0 }, /expireSeconds must be an integer from 1 to 2147483647/],
      [{ expireSeconds: 2147483648 }, /expireSeconds must be an integer from 1 to 2147483647/],
      [{ maxInterruptions: -1 }, /maxInterruptions must be an integer from 0 to 32767/],
      [{ maxInterruptions: 32768 }, /maxInterruptions must be an integer from 0 to 32767/],
      [{ maxDeferrals: -1 }, /maxDeferrals must be an integer from 0 to 32767/],
      [{ maxDeferrals: 32768 }, /maxDeferrals must be an integer from 0 to 32767/],
      [{ backoff: { baseMs: 0 } }, /backoff.baseMs must be an integer from 1 to 2147483647/],
      [{ backoff: { baseMs: 2147483648 } }, /backoff.baseMs must be an integer from 1 to 2147483647/],
      [{ backoff: { maxMs: 0 } }, /backoff.maxMs must be an integer from 1 to 2147483647/],
      [{ backoff: { maxMs: 2147483648 } }, /backoff.maxMs must be an integer from 1 to 2147483647/],
      [{ backoff: { baseMs: 10, jitter: true } }, /unknown option "jitter"/],
      [{ delayMs: -1 }, /delayMs must be a finite number of milliseconds, 0 or more/],
      [{ delayMs: Number.POSITIVE_INFINITY }, /delayMs must be a finite number/],
      [{ runAt: new Date(Number.NaN) }, /runAt must be a valid Date/],
      [{ runAt: '2026-01-01' }, /runAt must be a valid Date/],
      [{ tenantId: '' }, /tenantId must be a non-empty string/],
      [{ tenantId: 't'.repeat(1001) }, /tenantId must be at most 1000 characters/],
      [{ destination: 'd'.repeat(1001) }, /destination must be at most 1000 characters/],
      [{ destination: 'a\u0000b' }, /destination contains a NUL character/],
      [{ tenantId: '\ud800' }, /tenantId contains a NUL character or an unpaired surrogate/],
      [{ meta: [1] }, /meta must be a plain JSON object/],
      [{ meta: { blob: 'x'.repeat(1_048_600) } }, /meta is \d+ bytes as JSON, over the 1048576-byte limit/],
      [{ dedup: { scope: '' } }, /dedup.scope must be a non-empty string/],
      [{ dedup: { scope: 's'.repeat(8193) } }, /dedup.scope must be at most 8192 characters/],
      [{ dedup: { scope: 's', period: 'DAY' } }, /dedup.period must be one of/],
      [{ dedup: { scope: 's', key: 'k' } }, /unknown option "key"/],
      [{ queue: '' }, /queue must be a non-empty string/],
      [{ queue: 'has space' }, /queue must be 1 to 48 characters of letters, digits/],
      [{ queue: '_leading' }, /starting with a letter or digit/],
      [{ queue: 'ünïcode' }, /queue must be 1 to 48 characters/],
      [{ deadLetterQueue: 'x'.repeat(49) }, /deadLetterQueue must be 1 to 48 characters/],
    ])('refuses %j', async (options, message) => {
      await refused({}, options as unknown as EnqueueOptions, message);
    });

    it('strings at their limits: a 1000-character task, tenant and destination, an 8192-character dedup scope', async () => {
      const row = await stored({}, { tenantId: 't'.repeat(1000), destination: 'd'.repeat(1000), dedup: { scope: 's'.repeat(8192) } }, 'k'.repeat(1000));
      expect(row.task).toHaveLength(1000);
      expect(row.tenant_id).toHaveLength(1000);
      expect(row.destination).toHaveLength(1000);
      expect(row.dedup_scope).toHaveLength(8192);
      await refused({}, {}, /task must be at most 1000 characters/, 'k'.repeat(1001));
    });

    it('a far-future runAt: stored up to year 9999, refused by name past it, never a server error', async () => {
      const far = new Date('9999-12-31T23:59:59.000Z');
      expect((await stored({}, { runAt: far })).scheduled_at.toISOString()).toBe(far.toISOString());
      const farthest = new Date(8.64e15); // the last instant a JS Date can hold, year 275760
      await refused({}, { runAt: farthest }, /runAt must be a date from year 1 to 9999/);
    });
  });

  describe('args', () => {
    it.each([
      ['null', null, /args must be a plain JSON object/],
      ['a number', 42, /args must be a plain JSON object/],
      ['a class instance', new (class Money {})(), /got an instance of Money/],
      ['a bigint inside', { n: 10n }, /args.n is a bigint/],
      ['NaN inside', { n: Number.NaN }, /args.n is NaN/],
      [
        'a cycle',
        (() => {
          const a: Record<string, unknown> = {};
          a.self = a;
          return a;
        })(),
        /refers to itself/,
      ],
      ['a lone surrogate in a key', { ['k\udc00']: 1 }, /cannot be stored by PostgreSQL jsonb/],
      ['a NUL in a nested value', { a: [{ b: 'x\u0000' }] }, /args.a\[0\].b contains a NUL character/],
    ])('refuses %s', async (_what, args, message) => {
      await refused(args, {}, message);
    });

    it('nested 64 levels deep is stored; 65 is refused; 100,000 is refused without a stack overflow', async () => {
      const nest = (depth: number) => {
        let value: Record<string, unknown> = {};
        for (let i = 0; i < depth; i++) value = { d: value };
        return value;
      };
      const row = await stored(nest(63), {});
      expect(JSON.stringify(row.args)).toBe(JSON.stringify(nest(63)));
      await refused(nest(65), {}, /nested more than 64 levels deep/);
      await refused(nest(100_000), {}, /nested more than 64 levels deep/);
    });

    it('just under 1 MB is stored; just over is refused by its size in bytes, multi-byte characters counted as bytes', async () => {
      const under = { blob: 'x'.repeat(1_048_576 - 20) };
      expect((await stored(under, {})).args.blob).toHaveLength(under.blob.length);
      await refused({ blob: 'é'.repeat(600_000) }, {}, /args is 1200011 bytes as JSON, over the 1048576-byte limit/);
    });

    it('a megabyte of numbers, whose jsonb is larger than its JSON text, is refused by name, never a bare server error', async () => {
      // jsonb stores each number as a numeric with a header, about twice its
      // JSON text: text under the cap can be jsonb over the schema's CHECK.
      const numbers = { n: Array.from({ length: 120_000 }, (_, i) => 100_000 + ((i * 7919) % 900_000)) };
      const attempt = queue.enqueue('edge', numbers);
      const outcome = await attempt.then(
        () => 'stored',
        (err: unknown) => (err instanceof InvalidJobError ? 'refused' : `server error: ${(err as Error).message}`),
      );
      expect(outcome).toBe('refused');
      await expect(queue.enqueue('edge', numbers)).rejects.toThrow(/args is over the 1048576-byte limit as PostgreSQL stores it/);
    });

    it('odd Unicode round-trips exactly, in values and keys', async () => {
      const odd = {
        emoji: '👩‍👩‍👧‍👦🏳️‍🌈',
        rtl: '\u202Eabc\u202C عربى עברית',
        combining: 'e\u0301\u0308\u0323',
        zeroWidth: 'a\u200Bb\u200Dc\uFEFF',
        nonCharacter: '\uFFFF\uFFFE',
        astral: '𝕳𝖊𝖑𝖑𝖔 \u{10FFFD}',
        ['ключ 🔑']: 'значение',
        ['']: 'empty key',
        backslashes: '\\\\server\\share\\"quoted"\\u0000-not-a-nul',
        controls: '\u0001\u001f\u007f\t\n\r',
      };
      const row = await stored(odd, { meta: { 'emoji 🔑': '✓' } });
      expect(row.args).toEqual(odd);
      expect(row.meta).toEqual({ nestjs: { 'emoji 🔑': '✓' } });
      const job = await queue.getJob(row.id);
      expect(job?.args).toEqual(odd);
    });

    it('args that are arrays or strings are refused whichever way they arrive: enqueueMany too', async () => {
      const before = await jobCount();
      await expect(
        queue.enqueueMany([
          { task: 'edge', args: {} },
          { task: 'edge', args: [1] as unknown as object },
        ]),
      ).rejects.toThrow(/enqueueMany\(\) job #1: args must be a plain JSON object/);
      expect(await jobCount()).toBe(before);
    });
  });

  describe('dedup scopes', () => {
    it.each([
      ['backslashes', 'a\\b\\\\c\\'],
      ['quotes', `it's "quoted" \`too\``],
      ['an SQL comment and a semicolon', `x'; DELETE FROM stampeded_jobs; --`],
      ['a LIKE pattern', '%_%\\%'],
      ['Unicode', 'scope-é-👍-\u202E'],
      ['the longest allowed', 'q'.repeat(8192)],
    ])('%s: deduplicate exactly, and only against the same scope', async (_what, scope) => {
      const first = await queue.enqueue('dedup-edge', {}, { dedup: { scope } });
      const again = await queue.enqueue('dedup-edge', {}, { dedup: { scope } });
      expect(again).toEqual({ id: first.id, deduplicated: true });
      // One character more or less is another scope.
      const other = await queue.enqueue('dedup-edge', {}, { dedup: { scope: scope.length < 8192 ? `${scope}\\` : scope.slice(1) } });
      expect(other.deduplicated).toBe(false);
      expect((await queue.getJob(first.id))?.dedupScope).toBe(scope);
    });

    it('scopes that differ only by escaping are different scopes', async () => {
      const a = await queue.enqueue('dedup-edge', {}, { dedup: { scope: 'x\\"y' } });
      const b = await queue.enqueue('dedup-edge', {}, { dedup: { scope: 'x"y' } });
      const c = await queue.enqueue('dedup-edge', {}, { dedup: { scope: "x\\'y" } });
      // "\x41" once hashed as bytea 0x41, the same key as "A".
      const d = await queue.enqueue('dedup-edge', {}, { dedup: { scope: '\\x41' } });
      const e = await queue.enqueue('dedup-edge', {}, { dedup: { scope: 'A' } });
      expect(new Set([a.id, b.id, c.id, d.id, e.id]).size).toBe(5);
    });
  });

  describe('queue names', () => {
    it('names that differ only by punctuation never share a partition: the second is refused at bootstrap', async () => {
      const other = await testDatabase();
      try {
        await migrate(other.url);
        const boot = bootApp(other.url, {
          via: 'connection',
          stampeded: { worker: { enabled: false }, maintenance: { enabled: false } },
          queues: [{ name: 'billing.eu' }, { name: 'billing-eu' }],
        });
        await expect(boot).rejects.toThrow(StampededConfigError);
        await expect(
          bootApp(other.url, {
            via: 'connection',
            stampeded: { worker: { enabled: false }, maintenance: { enabled: false } },
            queues: [{ name: 'billing_eu' }],
          }),
        ).rejects.toThrow(/would use partition stampeded_jobs_billing_eu, which already holds queue billing.eu/);
      } finally {
        await other.drop();
      }
    });

    it('48 characters make a 63-byte partition name; two that differ in the last character get two partitions', async () => {
      const other = await testDatabase();
      try {
        await migrate(other.url);
        const a = `${'q'.repeat(47)}a`;
        const b = `${'q'.repeat(47)}b`;
        const app2 = await bootApp(other.url, {
          stampeded: { worker: { enabled: false }, maintenance: { enabled: false } },
          queues: [{ name: a }, { name: b }],
        });
        const queue2 = app2.get(QueueService);
        await queue2.enqueue('edge', {}, { queue: a });
        await queue2.enqueue('edge', {}, { queue: b });
        await queue2.enqueue('edge', {}, { queue: b });
        const check = await sqlClient(other.url);
        const { rows } = await check.query(
          `SELECT tableoid::regclass::text AS partition, queue, count(*)::int AS n FROM stampeded_jobs GROUP BY 1, 2 ORDER BY 2`,
        );
        await check.end();
        await app2.close();
        expect(rows).toEqual([
          { partition: `stampeded_jobs_${a}`, queue: a, n: 1 },
          { partition: `stampeded_jobs_${b}`, queue: b, n: 2 },
        ]);
        expect(Buffer.byteLength(`stampeded_jobs_${a}`)).toBe(63);
      } finally {
        await other.drop();
      }
    });

    it('unregistered queues that differ only by punctuation stay apart in the catch-all', async () => {
      await queue.enqueue('edge', {}, { queue: 'x.y' });
      await queue.enqueue('edge', {}, { queue: 'x_y' });
      await queue.enqueue('edge', {}, { queue: 'x_y' });
      expect((await queue.counts('x.y')).available).toBe(1);
      expect((await queue.counts('x_y')).available).toBe(2);
    });

    it('registerQueue refuses a name too long for a partition, at startup', async () => {
      await expect(
        bootApp(db.url, { via: 'connection', stampeded: { worker: { enabled: false }, maintenance: { enabled: false } }, queues: [{ name: 'r'.repeat(49) }] }),
      ).rejects.toThrow(/1 to 48 characters/);
    });
  });

  describe('process isolation', () => {
    it('a task with isolation process and no processFile, or a relative one, is refused at startup, saying what to give', async () => {
      @Task('isolated-without-file', { isolation: 'process' })
      class WithoutFile implements TaskHandler {
        handle() {}
      }
      @Task('isolated-relative-file', { isolation: 'process', processFile: './render.process.js' })
      class RelativeFile implements TaskHandler {
        handle() {}
      }
      const options = { via: 'connection' as const, stampeded: { worker: { enabled: false }, maintenance: { enabled: false } } };
      await expect(bootApp(db.url, { ...options, providers: [WithoutFile] })).rejects.toThrow(
        /@Task\('isolated-without-file'\) on WithoutFile: isolation 'process' needs a processFile, the module the child process runs, and none was given\. Give it as a URL beside the task: processFile: new URL/,
      );
      await expect(bootApp(db.url, { ...options, providers: [RelativeFile] })).rejects.toThrow(
        /and "\.\/render\.process\.js" is neither a URL nor an absolute path/,
      );
    });
  });

  describe('stored results', () => {
    it('a storeResult that is not true or false is refused at startup, naming the task', async () => {
      // A string, as a config file would give it: truthy, but not a decision.
      @Task('result-as-text', { storeResult: 'no' as unknown as boolean })
      class ResultAsText implements TaskHandler {
        handle() {}
      }
      await expect(
        bootApp(db.url, { via: 'connection', providers: [ResultAsText], stampeded: { worker: { enabled: false }, maintenance: { enabled: false } } }),
      ).rejects.toThrow(`@Task('result-as-text') on ResultAsText: storeResult must be true or false, got "no".`);
    });
  });
});
