import { endOfGap, instantsOf, isTimeZone, offsetAt, offsetsAround, wallTimeOf } from './time-zone.js';

const HOUR = 3_600_000;
const MINUTE = 60_000;
const at = (iso: string) => Date.parse(iso);
/** A wall time, written as if UTC, as the scheduler carries it. */
const wall = (local: string) => Date.parse(`${local}Z`);
const iso = (instants: number[]) => instants.map((i) => new Date(i).toISOString());

describe('isTimeZone', () => {
  it.each(['UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Kathmandu', 'Australia/Lord_Howe'])('knows %s', (zone) => {
    expect(isTimeZone(zone)).toBe(true);
  });

  it.each(['', 'Europe/Berln', 'Mars/Olympus_Mons', 'GMT+25'])('refuses %j', (zone) => {
    expect(isTimeZone(zone)).toBe(false);
  });

  it('refuses what is not a string', () => {
    expect(isTimeZone(undefined as never)).toBe(false);
    expect(isTimeZone(42 as never)).toBe(false);
  });
});

describe('offsetAt', () => {
  it('is local minus UTC, in winter and in summer', () => {
    expect(offsetAt(at('2025-01-15T12:00:00Z'), 'Europe/Berlin')).toBe(HOUR);
    expect(offsetAt(at('2025-07-15T12:00:00Z'), 'Europe/Berlin')).toBe(2 * HOUR);
    expect(offsetAt(at('2025-01-15T12:00:00Z'), 'America/New_York')).toBe(-5 * HOUR);
    expect(offsetAt(at('2025-07-15T12:00:00Z'), 'UTC')).toBe(0);
  });

  it('handles offsets that are not whole hours', () => {
    expect(offsetAt(at('2025-01-01T00:00:00Z'), 'Asia/Kathmandu')).toBe(5 * HOUR + 45 * MINUTE);
    expect(offsetAt(at('2025-01-01T00:00:00Z'), 'Asia/Kolkata')).toBe(5 * HOUR + 30 * MINUTE);
  });

  it('changes at the transition itself, not a minute either side', () => {
    // Europe/Berlin springs forward at 01:00 UTC on 30 March 2025.
    expect(offsetAt(at('2025-03-30T00:59:59Z'), 'Europe/Berlin')).toBe(HOUR);
    expect(offsetAt(at('2025-03-30T01:00:00Z'), 'Europe/Berlin')).toBe(2 * HOUR);
  });

  it('answers the same for every second of a minute (the cache is per minute)', () => {
    const minute = at('2025-10-26T00:59:00Z');
    const first = offsetAt(minute, 'Europe/Berlin');
    for (let s = 1; s < 60; s++) expect(offsetAt(minute + s * 1000, 'Europe/Berlin')).toBe(first);
  });
});

describe('wallTimeOf and offsetsAround', () => {
  it('reads an instant as the wall clock shows it', () => {
    expect(new Date(wallTimeOf(at('2025-07-15T12:00:00Z'), 'Europe/Berlin')).toISOString()).toBe('2025-07-15T14:00:00.000Z');
    expect(new Date(wallTimeOf(at('2025-01-15T03:00:00Z'), 'America/New_York')).toISOString()).toBe('2025-01-14T22:00:00.000Z');
  });

  it('sees the offsets a day either side: the same away from a transition, different across one', () => {
    expect(offsetsAround(at('2025-07-15T12:00:00Z'), 'Europe/Berlin')).toEqual([2 * HOUR, 2 * HOUR]);
    expect(offsetsAround(at('2025-03-30T01:00:00Z'), 'Europe/Berlin')).toEqual([HOUR, 2 * HOUR]);
    expect(offsetsAround(at('2025-10-26T01:00:00Z'), 'Europe/Berlin')).toEqual([2 * HOUR, HOUR]);
  });
});

describe('instantsOf', () => {
  it('is one instant on an ordinary day', () => {
    expect(iso(instantsOf(wall('2025-07-15T02:30:00'), 'Europe/Berlin'))).toEqual(['2025-07-15T00:30:00.000Z']);
    expect(iso(instantsOf(wall('2025-07-15T02:30:00'), 'UTC'))).toEqual(['2025-07-15T02:30:00.000Z']);
  });

  it('is none in the hour a spring-forward skips', () => {
    expect(instantsOf(wall('2025-03-30T02:30:00'), 'Europe/Berlin')).toEqual([]);
    expect(instantsOf(wall('2025-03-09T02:30:00'), 'America/New_York')).toEqual([]);
  });

  it('is two, earliest first, in the hour a fall-back repeats', () => {
    expect(iso(instantsOf(wall('2025-10-26T02:30:00'), 'Europe/Berlin'))).toEqual(['2025-10-26T00:30:00.000Z', '2025-10-26T01:30:00.000Z']);
    // The southern hemisphere falls back in April.
    expect(iso(instantsOf(wall('2025-04-06T02:30:00'), 'Australia/Sydney'))).toEqual(['2025-04-05T15:30:00.000Z', '2025-04-05T16:30:00.000Z']);
  });

  it('handles a transition of half an hour', () => {
    // Lord Howe Island falls back from +11:00 to +10:30 at 02:00 on 6 April 2025.
    expect(iso(instantsOf(wall('2025-04-06T01:45:00'), 'Australia/Lord_Howe'))).toEqual(['2025-04-05T14:45:00.000Z', '2025-04-05T15:15:00.000Z']);
    expect(iso(instantsOf(wall('2025-04-06T01:15:00'), 'Australia/Lord_Howe'))).toEqual(['2025-04-05T14:15:00.000Z']);
  });

  it('keeps the edges of a gap: the minute before it exists, its first minute does not, its end does', () => {
    expect(iso(instantsOf(wall('2025-03-30T01:59:00'), 'Europe/Berlin'))).toEqual(['2025-03-30T00:59:00.000Z']);
    expect(instantsOf(wall('2025-03-30T02:00:00'), 'Europe/Berlin')).toEqual([]);
    expect(iso(instantsOf(wall('2025-03-30T03:00:00'), 'Europe/Berlin'))).toEqual(['2025-03-30T01:00:00.000Z']);
  });
});

describe('endOfGap', () => {
  it('is the instant the clocks jump to, for any wall time inside the gap', () => {
    for (const local of ['2025-03-30T02:00:00', '2025-03-30T02:30:00', '2025-03-30T02:59:59']) {
      expect(new Date(endOfGap(wall(local), 'Europe/Berlin')).toISOString()).toBe('2025-03-30T01:00:00.000Z');
    }
    expect(new Date(endOfGap(wall('2025-03-09T02:30:00'), 'America/New_York')).toISOString()).toBe('2025-03-09T07:00:00.000Z');
  });
});
