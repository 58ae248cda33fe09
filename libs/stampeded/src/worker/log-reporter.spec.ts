import { jest } from '@jest/globals';
import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import type { Job } from '../interfaces/job.interface.js';
import { randomBytes } from 'node:crypto';
import { JobCipher } from '../encryption/job-cipher.js';
import { LIMITS } from '../stampeded.constants.js';
import { logLineText, LogReporter, sealableLineText } from './log-reporter.js';

describe('logLineText', () => {
  it('keeps a line within the limit as it is', () => {
    expect(logLineText('fetched page 3 of 10', 64)).toBe('fetched page 3 of 10');
    expect(logLineText('é'.repeat(32), 64)).toBe('é'.repeat(32));
  });

  it('cuts a longer line at a whole character, within the limit, saying how long it was', () => {
    const cut = logLineText(`${'x'.repeat(30)}${'€'.repeat(40)}`, 64);
    expect(cut).toMatch(/^x{30}€* … \[cut from 150 bytes\]$/);
    expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(64);
    // As many characters as fit: one more would not.
    expect(Buffer.byteLength(cut) + 3).toBeGreaterThan(64);
    const emoji = logLineText('😀'.repeat(100), 100);
    expect(emoji).toMatch(/^(😀)+ … \[cut from 400 bytes\]$/);
    expect(Buffer.byteLength(emoji)).toBeLessThanOrEqual(100);
  });

  it('replaces NUL, which PostgreSQL text cannot hold, and writes anything else as String() does', () => {
    expect(logLineText('a\u0000b', 64)).toBe('a\uFFFDb');
    expect(logLineText(42, 64)).toBe('42');
    expect(logLineText(null, 64)).toBe('null');
  });
});

describe('sealableLineText', () => {
  const cipher = JobCipher.from('test', { keys: { k1: randomBytes(32) }, current: 'k1' });
  const sealedBytes = (line: string) => Buffer.byteLength(cipher.seal('t', JSON.stringify(line)), 'utf8');

  it('keeps a short line, and cuts a long one, escapes and all, so that its envelope fits the column', () => {
    expect(sealableLineText('card ending 4242', 2048)).toBe('card ending 4242');
    for (const line of ['x'.repeat(70_000), '\u0001'.repeat(70_000), '"'.repeat(70_000), 'é'.repeat(40_000)]) {
      const text = sealableLineText(line, LIMITS.logLineBytes);
      expect(text).toMatch(/ … \[cut from \d+ bytes\]$/);
      expect(sealedBytes(text)).toBeLessThanOrEqual(LIMITS.logLineBytes);
    }
  });
});

describe('LogReporter', () => {
  const job = { id: 'job-1', queue: 'q', task: 't', attempt: 2 } as Job;
  /** Each write's lines and the count dropped before them, as the statement received them. */
  let writes: { messages: string[]; dropped: number; keep: number }[];
  let owned: boolean;
  let failNext: boolean;
  let lost: string[];
  let reporter: LogReporter;

  beforeEach(() => {
    jest.useFakeTimers();
    writes = [];
    owned = true;
    failNext = false;
    lost = [];
    const db = {
      query: async (_statement: unknown, values: unknown[]) => {
        if (failNext) {
          failNext = false;
          throw new Error('Connection terminated');
        }
        expect(values.slice(0, 4)).toEqual(['q', 'job-1', 'worker-1', 2]);
        expect((values[4] as Date[]).length).toBe((values[5] as string[]).length);
        if (!owned) return [{ owned: false }];
        writes.push({ messages: [...(values[5] as string[])], dropped: values[6] as number, keep: values[7] as number });
        return [{ owned: true }];
      },
    } as unknown as StampededDatabase;
    reporter = new LogReporter(db, 'worker-1', job, { maxLines: 3, maxLineBytes: 64 }, (reason) => lost.push(reason));
  });

  afterEach(() => jest.useRealTimers());

  it('writes the first line at once and the rest once the interval ends, keeping the newest and counting the others', async () => {
    reporter.log('line 1');
    await jest.advanceTimersByTimeAsync(0);
    for (let n = 2; n <= 10_000; n++) reporter.log(`line ${n}`);
    expect(writes).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(1000);
    expect(writes).toEqual([
      { messages: ['line 1'], dropped: 0, keep: 3 },
      { messages: ['line 9998', 'line 9999', 'line 10000'], dropped: 9996, keep: 3 },
    ]);
    await jest.advanceTimersByTimeAsync(5000);
    expect(writes).toHaveLength(2);
  });

  it('flush() writes the lines still waiting, and nothing after it', async () => {
    reporter.log('a');
    reporter.log('b');
    reporter.log('c');
    await reporter.flush();
    expect(writes.map((w) => w.messages)).toEqual([['a'], ['b', 'c']]);
    reporter.log('after the outcome');
    await jest.advanceTimersByTimeAsync(5000);
    expect(writes).toHaveLength(2);
  });

  it('stops, and says so, once a write finds the job no longer ours', async () => {
    reporter.log('a');
    await jest.advanceTimersByTimeAsync(0);
    owned = false;
    reporter.log('b');
    await jest.advanceTimersByTimeAsync(1000);
    expect(lost).toEqual(['a log write found the job no longer owned by this worker']);
    owned = true;
    reporter.log('c');
    await reporter.flush();
    expect(writes.map((w) => w.messages)).toEqual([['a']]);
  });

  it('stop() drops what waits', async () => {
    reporter.log('a');
    reporter.log('b');
    reporter.stop();
    await reporter.flush();
    expect(writes.map((w) => w.messages)).toEqual([['a']]);
  });

  it('keeps the lines of a write that failed, before the newer ones, within the cap, and never throws', async () => {
    const warnings: string[] = [];
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation((message: unknown) => void warnings.push(String(message)));
    try {
      failNext = true;
      reporter.log('a');
      await jest.advanceTimersByTimeAsync(0);
      expect(writes).toEqual([]);
      reporter.log('b');
      reporter.log('c');
      reporter.log('d');
      await jest.advanceTimersByTimeAsync(1000);
      expect(writes).toEqual([{ messages: ['b', 'c', 'd'], dropped: 1, keep: 3 }]);
      expect(warnings).toEqual(['job job-1 (t): 1 log line(s) not written (Connection terminated); they go with the next write']);
    } finally {
      warn.mockRestore();
    }
  });
});
