import { jest } from '@jest/globals';
import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import { ProgressError } from '../errors/stampeded.errors.js';
import type { Job, JobProgress } from '../interfaces/job.interface.js';
import { LIMITS } from '../stampeded.constants.js';
import { progressText, ProgressReporter } from './progress-reporter.js';

describe('progressText', () => {
  it('takes a finite number or a plain JSON object', () => {
    expect(progressText(42.5)).toBe('42.5');
    expect(progressText(0)).toBe('0');
    expect(progressText({ done: 40, total: 200, stage: 'upload' })).toBe('{"done":40,"total":200,"stage":"upload"}');
  });

  it('refuses anything else, saying what it takes, before anything is written', () => {
    const message = (got: string) => `ctx.progress() takes a finite number or a plain JSON object: ${got}. Nothing was written.`;
    expect(() => progressText('50%')).toThrow(new ProgressError(message('got string; wrap it: { value: ... }')));
    expect(() => progressText([1, 2])).toThrow(message('got an array; wrap it: { value: ... }'));
    expect(() => progressText(null)).toThrow(message('got null; wrap it: { value: ... }'));
    expect(() => progressText(NaN)).toThrow(message('got NaN, which JSON cannot represent'));
    expect(() => progressText(Infinity)).toThrow(ProgressError);
    expect(() => progressText({ stage: 'a\u0000' })).toThrow(/progress\.stage contains a NUL character/);
  });

  it('refuses a value over 1 KB, saying its size and what to report instead', () => {
    const at = { s: 'x'.repeat(LIMITS.progressBytes - '{"s":""}'.length) };
    expect(progressText(at)).toHaveLength(LIMITS.progressBytes);
    expect(() => progressText({ s: `${at.s}x` })).toThrow(
      `Progress is ${LIMITS.progressBytes + 1} bytes as JSON; the limit is ${LIMITS.progressBytes} bytes (1 KB). ` +
        `Report counts and a short stage ({ done: 40, total: 200, stage: 'upload' }); save larger state with saveCheckpoint(), or return it as the result.`,
    );
  });
});

describe('ProgressReporter', () => {
  const job = { id: 'job-1', queue: 'q', task: 't', attempt: 1 } as Job;
  let written: string[];
  let owned: boolean;
  let failNext: boolean;
  let events: { alive: number; lost: string[]; written: JobProgress[] };
  let reporter: ProgressReporter;

  beforeEach(() => {
    jest.useFakeTimers();
    written = [];
    owned = true;
    failNext = false;
    events = { alive: 0, lost: [], written: [] };
    const db = {
      query: async (_statement: unknown, values: unknown[]) => {
        if (failNext) {
          failNext = false;
          throw new Error('Connection terminated');
        }
        if (!owned) return [];
        written.push(values[4] as string);
        return [{ owned: true }];
      },
    } as unknown as StampededDatabase;
    reporter = new ProgressReporter(db, 'worker-1', job, {
      onAlive: () => events.alive++,
      onLost: (reason) => events.lost.push(reason),
      onWritten: (value) => events.written.push(value),
    });
  });

  afterEach(() => jest.useRealTimers());

  const report = (n: number) => reporter.report(String(n), n);

  it('writes the first report at once and, within the interval, only the last of the rest when it ends', async () => {
    expect(await report(1)).toBe(true);
    expect(written).toEqual(['1']);
    for (let n = 2; n <= 1000; n++) expect(await report(n)).toBe(true);
    expect(written).toEqual(['1']);
    await jest.advanceTimersByTimeAsync(1000);
    expect(written).toEqual(['1', '1000']);
    // Nothing new: the interval ends without a write.
    await jest.advanceTimersByTimeAsync(5000);
    expect(written).toEqual(['1', '1000']);
    expect(await report(1001)).toBe(true);
    expect(written).toEqual(['1', '1000', '1001']);
    expect(events).toEqual({ alive: 3, lost: [], written: [1, 1000, 1001] });
  });

  it('flush() writes the value still waiting, and nothing is written after it', async () => {
    await report(1);
    await report(2);
    await report(3);
    await reporter.flush();
    expect(written).toEqual(['1', '3']);
    expect(await report(4)).toBe(false);
    await jest.advanceTimersByTimeAsync(5000);
    expect(written).toEqual(['1', '3']);
  });

  it('flush() with nothing waiting writes nothing', async () => {
    await report(1);
    await reporter.flush();
    expect(written).toEqual(['1']);
  });

  it('answers false once a write finds the job no longer ours, and writes nothing after', async () => {
    await report(1);
    owned = false;
    await report(2);
    await jest.advanceTimersByTimeAsync(1000);
    expect(events.lost).toEqual(['progress found the job no longer owned by this worker']);
    expect(await report(3)).toBe(false);
    await reporter.flush();
    expect(written).toEqual(['1']);
  });

  it('stop() drops what waits: the job is no longer ours', async () => {
    await report(1);
    await report(2);
    reporter.stop();
    await jest.advanceTimersByTimeAsync(5000);
    await reporter.flush();
    expect(written).toEqual(['1']);
    expect(await report(3)).toBe(false);
  });

  it('keeps a value whose write failed for the next write, says so, and never throws', async () => {
    const warnings: string[] = [];
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation((message: unknown) => void warnings.push(String(message)));
    try {
      failNext = true;
      expect(await report(1)).toBe(true);
      expect(written).toEqual([]);
      await jest.advanceTimersByTimeAsync(1000);
      expect(written).toEqual(['1']);
      expect(warnings).toEqual(['job job-1 (t): progress not written (Connection terminated); it goes with the next report']);
    } finally {
      warn.mockRestore();
    }
  });
});
