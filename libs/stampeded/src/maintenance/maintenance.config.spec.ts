import { StampededConfigError } from '../errors/stampeded.errors.js';
import { INVALID_SCHEDULES_OPTION } from '../stampeded.messages.js';
import { MAINTENANCE_DEFAULTS, durationMs, resolveMaintenanceConfig } from './maintenance.config.js';

/** The message of what `fn` throws, checked to be a StampededConfigError. */
function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(StampededConfigError);
    return (err as Error).message;
  }
  throw new Error('expected a refusal, and nothing was thrown');
}

describe('durationMs', () => {
  it.each([
    [250, 250],
    ['250ms', 250],
    ['90s', 90_000],
    ['1m', 60_000],
    ['1h', 3_600_000],
    ['7d', 604_800_000],
    ['1h30m', 5_400_000],
    [' 1h 30m ', 5_400_000],
    ['1m1ms', 60_001],
  ])('reads %j as %d ms', (value, ms) => {
    expect(durationMs('opt', value)).toBe(ms);
  });

  it.each(['', '1.5h', '10', '5 minutes', 'banana', '-1s', '1w'])('refuses the text %j, saying what it takes', (value) => {
    expect(refusal(() => durationMs('pruneIntervalMs', value))).toBe(
      `StampededModule.forRoot(): maintenance.pruneIntervalMs must be milliseconds or a duration such as '90s', '1h' or '7d', got ${JSON.stringify(value)}.`,
    );
  });

  it.each([0, -5, 1.5, NaN, Infinity, '0s'])('refuses %p: a duration is a whole number of at least 1 ms', (value) => {
    expect(refusal(() => durationMs('reapIntervalMs', value))).toBe(
      `StampededModule.forRoot(): maintenance.reapIntervalMs must be a duration of at least 1 ms, got ${JSON.stringify(value)}.`,
    );
  });

  it('refuses what is neither a number nor a string', () => {
    expect(refusal(() => durationMs('x', { ms: 5 }))).toMatch(/got \{"ms":5\}/);
    expect(refusal(() => durationMs('x', null))).toMatch(/got null/);
  });

  it("words the error with the caller's message", () => {
    expect(refusal(() => durationMs('misfireGrace', 'soon', INVALID_SCHEDULES_OPTION))).toMatch(
      /^StampededModule\.forRoot\(\): schedules\.misfireGrace must be/,
    );
  });
});

describe('resolveMaintenanceConfig', () => {
  it('gives the defaults for no options, and for an empty object', () => {
    expect(resolveMaintenanceConfig(undefined)).toEqual(MAINTENANCE_DEFAULTS);
    expect(resolveMaintenanceConfig({})).toEqual(MAINTENANCE_DEFAULTS);
  });

  it('reads durations as numbers or text, under their resolved names', () => {
    const config = resolveMaintenanceConfig({
      reapDeadAfter: '2m',
      completedRetention: '2h',
      failedRetention: '30d',
      occurrenceRetention: 86_400_000,
      leaderCheckIntervalMs: 500,
    });
    expect(config).toMatchObject({
      reapDeadAfterMs: 120_000,
      completedRetentionMs: 7_200_000,
      failedRetentionMs: 2_592_000_000,
      occurrenceRetentionMs: 86_400_000,
      leaderCheckIntervalMs: 500,
      reapIntervalMs: MAINTENANCE_DEFAULTS.reapIntervalMs,
    });
  });

  it('turns reindex on, with the default interval or its own', () => {
    expect(resolveMaintenanceConfig({ reindex: true })).toMatchObject({ reindex: true, reindexIntervalMs: MAINTENANCE_DEFAULTS.reindexIntervalMs });
    expect(resolveMaintenanceConfig({ reindex: { intervalMs: '6h' } })).toMatchObject({ reindex: true, reindexIntervalMs: 21_600_000 });
    expect(resolveMaintenanceConfig({ reindex: false })).toMatchObject({ reindex: false });
  });

  it('refuses unknown options, listing the allowed ones', () => {
    expect(refusal(() => resolveMaintenanceConfig({ reapDeadAfterMs: 1000, pruneEvery: '1m' } as never))).toBe(
      'StampededModule.forRoot(): maintenance: unknown options "reapDeadAfterMs", "pruneEvery". Allowed: enabled, leaderCheckIntervalMs, ' +
        'reapIntervalMs, reapDeadAfter, expireIntervalMs, expireBatchSize, orderingSweepIntervalMs, pruneIntervalMs, completedRetention, failedRetention, ' +
        'occurrenceRetention, pruneBatchSize, pruneMaxDurationMs, partitionCheckIntervalMs, healthIntervalMs, reindex, insights.',
    );
    expect(refusal(() => resolveMaintenanceConfig({ insights: { every: '1m' } } as never))).toBe(
      'StampededModule.forRoot(): maintenance.insights: unknown option "every". Allowed: intervalMs, settle, batchSize, minuteRetention, hourRetention.',
    );
  });

  it('reads the insights rollup as on by default, off, or its settings', () => {
    const on = resolveMaintenanceConfig({});
    expect([on.insights, on.insightsIntervalMs, on.insightsSettleMs, on.insightsBatchSize]).toEqual([true, 15_000, 30_000, 10_000]);
    expect(resolveMaintenanceConfig({ insights: false }).insights).toBe(false);
    const set = resolveMaintenanceConfig({ insights: { settle: '5s', batchSize: 500, minuteRetention: '1d', hourRetention: '90d' } });
    expect([set.insights, set.insightsSettleMs, set.insightsBatchSize, set.insightsMinuteRetentionMs, set.insightsHourRetentionMs]).toEqual([
      true,
      5_000,
      500,
      86_400_000,
      90 * 86_400_000,
    ]);
  });

  it.each([
    [{ enabled: 'yes' }, 'enabled must be true or false, got "yes"'],
    [{ pruneBatchSize: 0 }, 'pruneBatchSize must be a whole number of 1 or more, got 0'],
    [{ expireBatchSize: 2.5 }, 'expireBatchSize must be a whole number of 1 or more, got 2.5'],
    [{ reindex: 'weekly' }, `reindex must be true, false or { intervalMs }, got "weekly"`],
    [{ reindex: { intervalMs: 'often' } }, `reindex.intervalMs must be milliseconds or a duration such as '90s', '1h' or '7d', got "often"`],
    [{ insights: 'hourly' }, `insights must be true, false or { intervalMs, settle, batchSize, minuteRetention, hourRetention }, got "hourly"`],
    [{ insights: { settle: 'soon' } }, `insights.settle must be milliseconds or a duration such as '90s', '1h' or '7d', got "soon"`],
    [{ insights: { batchSize: 0 } }, 'insights.batchSize must be a whole number of 1 or more, got 0'],
    [{ completedRetention: '1 day' }, `completedRetention must be milliseconds or a duration such as '90s', '1h' or '7d', got "1 day"`],
  ])('refuses %j, naming the option', (options, message) => {
    expect(refusal(() => resolveMaintenanceConfig(options as never))).toBe(`StampededModule.forRoot(): maintenance.${message}.`);
  });

  it('refuses a reaper that would call a live worker dead: under three of its heartbeats', () => {
    expect(refusal(() => resolveMaintenanceConfig({ reapDeadAfter: '10s' }))).toBe(
      'StampededModule.forRoot(): maintenance.reapDeadAfter is 10000 ms, less than three worker heartbeats (worker.heartbeatIntervalMs is 5000 ms); ' +
        "a live worker's jobs would be reaped and run twice. Raise it to 15000 ms or more.",
    );
    expect(resolveMaintenanceConfig({ reapDeadAfter: '15s' }).reapDeadAfterMs).toBe(15_000);
    // Against the worker's own heartbeat, when it is set.
    expect(resolveMaintenanceConfig({ reapDeadAfter: 1000 }, 200).reapDeadAfterMs).toBe(1000);
    expect(() => resolveMaintenanceConfig(undefined, 30_000)).toThrow(/reapDeadAfter is 60000 ms, less than three worker heartbeats/);
  });
});
