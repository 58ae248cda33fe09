import { nextOccurrence, parseEvery, planFiring, validateSchedule, type ScheduleRule } from './schedule-rule.js';
import type { DstPolicy } from '../interfaces/schedule.interface.js';

function rule(cron: string, timezone: string, dstPolicy: DstPolicy): ScheduleRule {
  return { key: 'k', cron, intervalSecs: null, timezone, dstPolicy, missedPolicy: 'once' };
}

/** The next `n` occurrences after `from`, as ISO strings. */
function runs(r: ScheduleRule, from: string, n: number): string[] {
  const out: string[] = [];
  let at = new Date(from);
  for (let i = 0; i < n; i++) {
    at = nextOccurrence(r, at)!;
    out.push(at.toISOString());
  }
  return out;
}

describe('nextOccurrence across DST transitions', () => {
  // Europe/Berlin 2026: clocks go 02:00 CET -> 03:00 CEST on 29 March (01:00 UTC)
  // and 03:00 CEST -> 02:00 CET on 25 October (01:00 UTC).
  it('Europe/Berlin spring forward: instant skips the missing 02:30, wall_clock fires at 03:00 CEST', () => {
    expect(runs(rule('30 2 * * *', 'Europe/Berlin', 'instant'), '2026-03-28T12:00:00Z', 2)).toEqual(['2026-03-30T00:30:00.000Z', '2026-03-31T00:30:00.000Z']);
    expect(runs(rule('30 2 * * *', 'Europe/Berlin', 'wall_clock'), '2026-03-28T12:00:00Z', 2)).toEqual([
      '2026-03-29T01:00:00.000Z',
      '2026-03-30T00:30:00.000Z',
    ]);
  });

  it('Europe/Berlin fall back: instant fires the repeated 02:30 twice, wall_clock once', () => {
    expect(runs(rule('30 2 * * *', 'Europe/Berlin', 'instant'), '2026-10-24T12:00:00Z', 3)).toEqual([
      '2026-10-25T00:30:00.000Z',
      '2026-10-25T01:30:00.000Z',
      '2026-10-26T01:30:00.000Z',
    ]);
    expect(runs(rule('30 2 * * *', 'Europe/Berlin', 'wall_clock'), '2026-10-24T12:00:00Z', 2)).toEqual([
      '2026-10-25T00:30:00.000Z',
      '2026-10-26T01:30:00.000Z',
    ]);
  });

  it('Europe/Berlin hourly through the fall-back night', () => {
    expect(runs(rule('0 * * * *', 'Europe/Berlin', 'instant'), '2026-10-24T22:30:00Z', 4)).toEqual([
      '2026-10-24T23:00:00.000Z',
      '2026-10-25T00:00:00.000Z',
      '2026-10-25T01:00:00.000Z',
      '2026-10-25T02:00:00.000Z',
    ]);
    expect(runs(rule('0 * * * *', 'Europe/Berlin', 'wall_clock'), '2026-10-24T22:30:00Z', 3)).toEqual([
      '2026-10-24T23:00:00.000Z',
      '2026-10-25T00:00:00.000Z',
      '2026-10-25T02:00:00.000Z',
    ]);
  });

  // America/New_York 2026: 02:00 EST -> 03:00 EDT on 8 March (07:00 UTC);
  // 02:00 EDT -> 01:00 EST on 1 November (06:00 UTC), so 01:xx happens twice.
  it('America/New_York spring forward', () => {
    expect(runs(rule('30 2 * * *', 'America/New_York', 'instant'), '2026-03-07T12:00:00Z', 2)).toEqual([
      '2026-03-09T06:30:00.000Z',
      '2026-03-10T06:30:00.000Z',
    ]);
    expect(runs(rule('30 2 * * *', 'America/New_York', 'wall_clock'), '2026-03-07T12:00:00Z', 2)).toEqual([
      '2026-03-08T07:00:00.000Z',
      '2026-03-09T06:30:00.000Z',
    ]);
  });

  it('America/New_York fall back', () => {
    expect(runs(rule('30 1 * * *', 'America/New_York', 'instant'), '2026-10-31T12:00:00Z', 3)).toEqual([
      '2026-11-01T05:30:00.000Z',
      '2026-11-01T06:30:00.000Z',
      '2026-11-02T06:30:00.000Z',
    ]);
    expect(runs(rule('30 1 * * *', 'America/New_York', 'wall_clock'), '2026-10-31T12:00:00Z', 2)).toEqual([
      '2026-11-01T05:30:00.000Z',
      '2026-11-02T06:30:00.000Z',
    ]);
  });

  it('collapses several skipped wall times into one firing when the gap ends', () => {
    expect(runs(rule('*/30 * * * *', 'Europe/Berlin', 'wall_clock'), '2026-03-29T00:45:00Z', 3)).toEqual([
      '2026-03-29T01:00:00.000Z',
      '2026-03-29T01:30:00.000Z',
      '2026-03-29T02:00:00.000Z',
    ]);
  });

  it('finds the second instance of a repeated time even when the next match is a year away', () => {
    expect(runs(rule('40 2 25 10 *', 'Europe/Berlin', 'instant'), '2026-10-25T00:45:00Z', 1)).toEqual(['2026-10-25T01:40:00.000Z']);
  });

  it('walks a seconds field through the end of the repeated hour, and wall_clock never replays it', () => {
    expect(runs(rule('* * * * * *', 'Europe/Berlin', 'instant'), '2026-10-25T00:59:58Z', 3)).toEqual([
      '2026-10-25T00:59:59.000Z',
      '2026-10-25T01:00:00.000Z',
      '2026-10-25T01:00:01.000Z',
    ]);
    // From inside the second 02:00-03:00 (CET): the next new wall time is 03:00.
    expect(runs(rule('* * * * *', 'Europe/Berlin', 'wall_clock'), '2026-10-25T01:00:00Z', 2)).toEqual(['2026-10-25T02:00:00.000Z', '2026-10-25T02:01:00.000Z']);
  });

  it('reads a seconds field, and UTC has no transitions', () => {
    expect(runs(rule('*/20 * * * * *', 'UTC', 'instant'), '2026-01-01T00:00:00Z', 3)).toEqual([
      '2026-01-01T00:00:20.000Z',
      '2026-01-01T00:00:40.000Z',
      '2026-01-01T00:01:00.000Z',
    ]);
  });
});

describe('planFiring', () => {
  const hourly = { ...rule('0 * * * *', 'UTC', 'instant') };
  it('fires an occurrence within the grace and moves to the one after it', () => {
    const plan = planFiring(hourly, new Date('2026-01-01T10:00:00Z'), new Date('2026-01-01T10:00:30Z'), 60_000);
    expect(plan).toEqual({ fire: true, missed: false, nextRunAt: new Date('2026-01-01T11:00:00Z') });
  });
  it("missed with 'once': one catch-up, then the next future occurrence", () => {
    const plan = planFiring(hourly, new Date('2026-01-01T10:00:00Z'), new Date('2026-01-01T13:20:00Z'), 60_000);
    expect(plan).toEqual({ fire: true, missed: true, nextRunAt: new Date('2026-01-01T14:00:00Z') });
  });
  it("missed with 'skip': nothing, then the next future occurrence", () => {
    const plan = planFiring({ ...hourly, missedPolicy: 'skip' }, new Date('2026-01-01T10:00:00Z'), new Date('2026-01-01T13:20:00Z'), 60_000);
    expect(plan).toEqual({ fire: false, missed: true, nextRunAt: new Date('2026-01-01T14:00:00Z') });
  });
  it('an interval keeps its phase after downtime', () => {
    const every = { ...hourly, cron: null, intervalSecs: 600 };
    const plan = planFiring(every, new Date('2026-01-01T10:05:00Z'), new Date('2026-01-01T11:00:00Z'), 60_000);
    expect(plan.nextRunAt).toEqual(new Date('2026-01-01T11:05:00Z'));
  });
});

describe('validateSchedule', () => {
  const base = { key: 'nightly', task: 'report' };
  it.each([
    [{ cron: '61 * * * *' }, /Schedule "nightly": cron "61 \* \* \* \*" is not a valid cron expression/],
    [{ cron: '* * *' }, /Schedule "nightly": cron .* is not a valid cron expression/],
    [{ cron: '0 3 * * *', timezone: 'Europe/Berlln' }, /Schedule "nightly": timezone "Europe\/Berlln" is not a known IANA time zone/],
    [{ every: 0 }, /Schedule "nightly": every takes a duration with its unit, such as '0s' or '15m', got the number 0/],
    [
      { every: 5000 },
      /Schedule "nightly": every takes a duration with its unit, such as '5000s' or '15m', got the number 5000 \(0\.1\.0 read a number as seconds/,
    ],
    [{ every: '0m' }, /Schedule "nightly": every must be a duration of at least 1 ms, got "0m"/],
    [{ every: 'soon' }, /Schedule "nightly": every must be milliseconds or a duration such as '90s'/],
    [{ every: '1500ms' }, /Schedule "nightly": every must be a whole number of seconds, got "1500ms"\.$/],
    [{ cron: '0 3 * * *', every: '1h' }, /Schedule "nightly": cron\/every are both set/],
    [{}, /Schedule "nightly": cron\/every are both missing/],
    [{ every: '1h', dstPolicy: 'wall_clock' }, /Schedule "nightly": dstPolicy is 'wall_clock', but an interval/],
    [{ cron: '0 0 30 2 *' }, /Schedule "nightly": cron "0 0 30 2 \*" never matches a date/],
    [{ cron: '0 3 * * *', missedPolicy: 'all' }, /Schedule "nightly": missedPolicy must be 'once' or 'skip'/],
    [{ cron: '0 3 * * *', nope: 1 }, /Schedule "nightly": unknown option "nope"/],
  ])('rejects %j', (extra, message) => {
    expect(() => validateSchedule({ ...base, ...extra } as never)).toThrow(message);
  });

  it('parses durations into seconds', () => {
    expect(parseEvery('k', '1h30m')).toBe(5400);
    expect(parseEvery('k', '45s')).toBe(45);
  });
});
