import { StampededConfigError } from '../errors/stampeded.errors.js';
import { SCHEDULES_DEFAULTS, resolveSchedulesConfig } from './schedules.config.js';

describe('resolveSchedulesConfig', () => {
  it('gives the defaults for no options', () => {
    expect(resolveSchedulesConfig(undefined)).toEqual(SCHEDULES_DEFAULTS);
    expect(resolveSchedulesConfig({})).toEqual(SCHEDULES_DEFAULTS);
  });

  it('reads each option, the grace as milliseconds or a duration', () => {
    expect(resolveSchedulesConfig({ enabled: false, pollIntervalMs: 200, batchSize: 10, misfireGrace: '5m' })).toEqual({
      enabled: false,
      pollIntervalMs: 200,
      batchSize: 10,
      misfireGraceMs: 300_000,
    });
    expect(resolveSchedulesConfig({ misfireGrace: 1500 }).misfireGraceMs).toBe(1500);
  });

  it('refuses unknown options, listing the allowed ones', () => {
    expect(() => resolveSchedulesConfig({ pollInterval: 100 } as never)).toThrow(
      new StampededConfigError(
        'StampededModule.forRoot(): schedules: unknown option "pollInterval". Allowed: enabled, pollIntervalMs, batchSize, misfireGrace.',
      ),
    );
  });

  it.each([
    [{ enabled: 1 }, 'enabled must be true or false, got 1'],
    [{ pollIntervalMs: 0 }, 'pollIntervalMs must be a whole number of 1 or more, got 0'],
    [{ batchSize: 2.5 }, 'batchSize must be a whole number of 1 or more, got 2.5'],
    [{ batchSize: '10' }, 'batchSize must be a whole number of 1 or more, got "10"'],
    [{ misfireGrace: 'a minute' }, `misfireGrace must be milliseconds or a duration such as '90s', '1h' or '7d', got "a minute"`],
    [{ misfireGrace: 0 }, 'misfireGrace must be a duration of at least 1 ms, got 0'],
  ])('refuses %j, naming the option', (options, message) => {
    expect(() => resolveSchedulesConfig(options as never)).toThrow(new StampededConfigError(`StampededModule.forRoot(): schedules.${message}.`));
  });
});
