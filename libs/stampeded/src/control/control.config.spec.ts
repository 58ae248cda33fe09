import { StampededConfigError } from '../errors/stampeded.errors.js';
import { CONTROL_DEFAULTS, breakerConfigFor, rateLimitClaimFor, resolveControlConfig, startGraceMs, validateQueuePolicy } from './control.config.js';

const refused = (message: string) => new StampededConfigError(`StampededModule.forRoot(): control.${message}.`);

describe('resolveControlConfig', () => {
  it('gives the defaults, with no fairness and no per-destination breakers', () => {
    expect(resolveControlConfig(undefined)).toEqual({
      plannerIntervalMs: CONTROL_DEFAULTS.plannerIntervalMs,
      freshnessMs: CONTROL_DEFAULTS.freshnessMs,
      refreshIntervalMs: CONTROL_DEFAULTS.refreshIntervalMs,
      breakerDefault: CONTROL_DEFAULTS.breaker,
      breakers: new Map(),
      fairness: null,
      rateLimits: new Map(),
    });
    expect(resolveControlConfig({ fairness: false }).fairness).toBeNull();
  });

  it('reads intervals as milliseconds or durations', () => {
    expect(resolveControlConfig({ plannerInterval: '500ms', freshness: '5s', refreshInterval: 250 })).toMatchObject({
      plannerIntervalMs: 500,
      freshnessMs: 5000,
      refreshIntervalMs: 250,
    });
  });

  it('refuses a freshness no longer than the planner interval: every verdict would be stale', () => {
    expect(() => resolveControlConfig({ plannerInterval: '10s', freshness: '10s' })).toThrow(
      refused(
        'freshness is 10000 ms, not longer than plannerInterval (10000 ms): every verdict would be stale before the next one. Make it several planner intervals',
      ),
    );
  });

  it('resolves breakers: the default over the built-in one, each destination over the default', () => {
    const config = resolveControlConfig({
      breakers: { default: { threshold: 3, cooldown: '10s' }, destinations: { 'api.slow': { window: '5m' }, 'api.off': { enabled: false } } },
    });
    expect(config.breakerDefault).toEqual({ enabled: true, threshold: 3, windowMs: 60_000, cooldownMs: 10_000 });
    expect(breakerConfigFor(config, 'api.slow')).toEqual({ enabled: true, threshold: 3, windowMs: 300_000, cooldownMs: 10_000 });
    expect(breakerConfigFor(config, 'api.off')).toMatchObject({ enabled: false, threshold: 3 });
    expect(breakerConfigFor(config, 'anything.else')).toBe(config.breakerDefault);
  });

  it('resolves fairness: true for equal shares, or weights and caps per tenant', () => {
    expect(resolveControlConfig({ fairness: true }).fairness).toEqual({
      weights: new Map(),
      maxRunning: new Map(),
      defaultMaxRunning: Infinity,
      retryDelayMs: CONTROL_DEFAULTS.fairnessRetryDelayMs,
    });
    expect(resolveControlConfig({ fairness: { weights: { big: 2.5 }, maxRunning: { big: 20 }, retryDelay: '2s' } }).fairness).toEqual({
      weights: new Map([['big', 2.5]]),
      maxRunning: new Map([['big', 20]]),
      defaultMaxRunning: Infinity,
      retryDelayMs: 2000,
    });
    expect(resolveControlConfig({ fairness: { maxRunning: 4 } }).fairness).toMatchObject({ maxRunning: new Map(), defaultMaxRunning: 4 });
  });

  it('refuses unknown options at every level, listing the allowed ones', () => {
    expect(() => resolveControlConfig({ planner: 1 } as never)).toThrow(
      new StampededConfigError(
        'StampededModule.forRoot(): control: unknown option "planner". Allowed: plannerInterval, freshness, refreshInterval, breakers, fairness, rateLimits.',
      ),
    );
    expect(() => resolveControlConfig({ breakers: { perDestination: {} } } as never)).toThrow(
      new StampededConfigError('StampededModule.forRoot(): control.breakers: unknown option "perDestination". Allowed: default, destinations.'),
    );
    expect(() => resolveControlConfig({ breakers: { default: { limit: 3 } } } as never)).toThrow(
      new StampededConfigError('StampededModule.forRoot(): control.breakers.default: unknown option "limit". Allowed: threshold, window, cooldown, enabled.'),
    );
    expect(() => resolveControlConfig({ fairness: { weight: {} } } as never)).toThrow(
      new StampededConfigError('StampededModule.forRoot(): control.fairness: unknown option "weight". Allowed: weights, maxRunning, retryDelay.'),
    );
  });

  it.each([
    [{ breakers: { default: { threshold: 0 } } }, 'breakers.default.threshold must be a whole number greater than 0, got 0'],
    [{ breakers: { default: { threshold: 2.5 } } }, 'breakers.default.threshold must be a whole number greater than 0, got 2.5'],
    [{ breakers: { destinations: { api: { enabled: 'no' } } } }, 'breakers.destinations.api.enabled must be true or false, got "no"'],
    [
      { breakers: { destinations: { api: { cooldown: 'later' } } } },
      `breakers.destinations.api.cooldown must be milliseconds or a duration such as '90s', '1h' or '7d', got "later"`,
    ],
    [{ breakers: [] }, 'breakers must be an object, got []'],
    [{ fairness: 'on' }, 'fairness must be true, false or { weights, maxRunning, retryDelay }, got "on"'],
    [{ fairness: { weights: { a: -1 } } }, 'fairness.weights.a must be a number greater than 0, got -1'],
    [{ fairness: { maxRunning: { a: 1.5 } } }, 'fairness.maxRunning.a must be a whole number greater than 0, got 1.5'],
    [{ fairness: { maxRunning: 0 } }, 'fairness.maxRunning must be a whole number greater than 0, got 0'],
    [{ plannerInterval: 0 }, 'plannerInterval must be a duration of at least 1 ms, got 0'],
    [{ rateLimits: { queues: { q: { limit: 0, per: '1s' } } } }, 'rateLimits.queues.q.limit must be a whole number greater than 0, got 0'],
    [{ rateLimits: { tasks: { t: { limit: 5 } } } }, `rateLimits.tasks.t.per is required: the window the limit counts starts in, such as '1s' or '1m'`],
    [
      { rateLimits: { tenants: { '*': { limit: 5, per: 'soon' } } } },
      `rateLimits.tenants.*.per must be milliseconds or a duration such as '90s', '1h' or '7d', got "soon"`,
    ],
    [{ rateLimits: { destinations: { api: 10 } } }, 'rateLimits.destinations.api must be an object, got 10'],
  ])('refuses %j, naming the option', (options, message) => {
    expect(() => resolveControlConfig(options as never)).toThrow(refused(message));
  });
});

describe('rate limits', () => {
  it('resolves each kind to limits with their windows in ms, and refuses unknown options', () => {
    const config = resolveControlConfig({
      rateLimits: { queues: { emails: { limit: 100, per: '1s' } }, tenants: { '*': { limit: 10, per: 60_000 }, acme: { limit: 50, per: '1m' } } },
    });
    expect(config.rateLimits).toEqual(
      new Map([
        ['queue', new Map([['emails', { limit: 100, ms: 1000 }]])],
        [
          'tenant',
          new Map([
            ['*', { limit: 10, ms: 60_000 }],
            ['acme', { limit: 50, ms: 60_000 }],
          ]),
        ],
      ]),
    );
    expect(() => resolveControlConfig({ rateLimits: { queue: {} } } as never)).toThrow(
      new StampededConfigError('StampededModule.forRoot(): control.rateLimits: unknown option "queue". Allowed: queues, tasks, tenants, destinations.'),
    );
    expect(() => resolveControlConfig({ rateLimits: { tasks: { t: { max: 1, per: '1s' } } } } as never)).toThrow(
      new StampededConfigError('StampededModule.forRoot(): control.rateLimits.tasks.t: unknown option "max". Allowed: limit, per.'),
    );
  });

  it("passes a claim the queue's own limit (or '*') and every task, tenant and destination limit, each window widened by its start grace; none without limits", () => {
    const config = resolveControlConfig({
      rateLimits: { queues: { emails: { limit: 100, per: '1s' }, '*': { limit: 5, per: '1s' } }, tasks: { send: { limit: 2, per: '1m' } } },
    }).rateLimits;
    const emails = rateLimitClaimFor(config, 'emails')!;
    expect(JSON.parse(emails.rules)).toEqual({ queue: { emails: { limit: 100, ms: 1100 } }, task: { send: { limit: 2, ms: 60_250 } } });
    // A job may fall under either rule: it starts within the shorter grace.
    expect(emails.startGraceMs).toBe(100);
    expect(JSON.parse(rateLimitClaimFor(config, 'other')!.rules)).toEqual({
      queue: { other: { limit: 5, ms: 1100 } },
      task: { send: { limit: 2, ms: 60_250 } },
    });
    expect(rateLimitClaimFor(resolveControlConfig({}).rateLimits, 'emails')).toBeNull();
  });

  it('gives a start grace of 10% of the window, within its floor and ceiling', () => {
    expect(startGraceMs(1000)).toBe(100);
    expect(startGraceMs(100)).toBe(20);
    expect(startGraceMs(3_600_000)).toBe(250);
  });
});

describe('validateQueuePolicy', () => {
  const where = "registerQueue('mail')";

  it('clears both limits when there is no policy, or when a limit is null', () => {
    expect(validateQueuePolicy(where, undefined)).toEqual({ maxRunning: null, maxWaitSecs: null });
    expect(validateQueuePolicy(where, { maxRunning: null, maxWaitSecs: 30 })).toEqual({ maxRunning: null, maxWaitSecs: 30 });
    expect(validateQueuePolicy(where, { maxRunning: 2147483647 })).toEqual({ maxRunning: 2147483647, maxWaitSecs: null });
  });

  it.each([
    [{ maxRunning: 0 }, 'policy.maxRunning must be a whole number from 1 to 2147483647 (or null for none), got 0.'],
    [{ maxWaitSecs: 2147483648 }, 'policy.maxWaitSecs must be a whole number from 1 to 2147483647 (or null for none), got 2147483648.'],
    [{ maxRunning: '5' }, 'policy.maxRunning must be a whole number from 1 to 2147483647 (or null for none), got "5".'],
    [{ maxRuning: 5 }, 'policy: unknown option "maxRuning". Allowed: maxRunning, maxWaitSecs.'],
    [5, 'policy must be an object such as { maxRunning: 10, maxWaitSecs: 30 }, got 5.'],
  ])('refuses %j', (policy, message) => {
    expect(() => validateQueuePolicy(where, policy as never)).toThrow(new StampededConfigError(`${where}: ${message}`));
  });
});
