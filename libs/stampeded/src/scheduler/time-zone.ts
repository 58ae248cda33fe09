/**
 * Wall-clock time in an IANA time zone, without a date library: the platform's
 * Intl data is the same tz database PostgreSQL is built with, and the only
 * question asked of it is "what is the UTC offset at this instant".
 *
 * A wall time is carried as milliseconds "as if UTC": 02:30 local on a day is
 * Date.UTC(that day, 02:30). That lets cron enumerate wall times in UTC, where
 * no hour repeats or vanishes, and this file decides which instants each wall
 * time is -- none (a spring-forward gap), one, or two (a fall-back fold).
 */

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/** True when the platform knows the zone (an IANA name such as Europe/Berlin, or UTC). */
export function isTimeZone(timeZone: string): boolean {
  if (typeof timeZone !== 'string' || timeZone.length === 0) return false;
  try {
    formatter(timeZone);
    return true;
  } catch {
    return false;
  }
}

/**
 * Offsets by zone and UTC minute. Transitions fall on whole minutes (in
 * every zone since the 1970s), so one answer serves a whole minute; a
 * per-second cron walking through a fall-back hour asks about the same few
 * minutes thousands of times, and Intl is the slow part of that walk.
 */
const offsetCache = new Map<string, Map<number, number>>();
const OFFSET_CACHE_LIMIT = 50_000;

/** Local minus UTC at an instant, in milliseconds: +3,600,000 for Berlin in winter. */
export function offsetAt(instant: number, timeZone: string): number {
  const minute = Math.floor(instant / 60_000);
  let byMinute = offsetCache.get(timeZone);
  if (!byMinute) offsetCache.set(timeZone, (byMinute = new Map()));
  let offset = byMinute.get(minute);
  if (offset === undefined) {
    if (byMinute.size >= OFFSET_CACHE_LIMIT) byMinute.clear();
    offset = formatOffset(minute * 60_000, timeZone);
    byMinute.set(minute, offset);
  }
  return offset;
}

function formatOffset(instant: number, timeZone: string): number {
  const whole = Math.floor(instant / 1000) * 1000;
  const parts: Record<string, number> = {};
  for (const p of formatter(timeZone).formatToParts(new Date(whole))) {
    if (p.type !== 'literal') parts[p.type] = Number(p.value);
  }
  const asUtc = Date.UTC(parts.year, parts.month - 1, parts.day, parts.hour, parts.minute, parts.second);
  return asUtc - whole;
}

/** The wall time of an instant, as milliseconds "as if UTC". */
export function wallTimeOf(instant: number, timeZone: string): number {
  return instant + offsetAt(instant, timeZone);
}

const DAY = 86_400_000;

/** The offsets in force a day either side: different only near a transition. */
export function offsetsAround(instant: number, timeZone: string): [number, number] {
  return [offsetAt(instant - DAY, timeZone), offsetAt(instant + DAY, timeZone)];
}

/**
 * The instants at which the zone's clocks show `wall`, earliest first: two in
 * the hour a fall-back repeats, none in the hour a spring-forward skips.
 */
export function instantsOf(wall: number, timeZone: string): number[] {
  const [before, after] = offsetsAround(wall, timeZone);
  const found = new Set<number>();
  for (const offset of [before, after]) {
    const instant = wall - offset;
    if (offsetAt(instant, timeZone) === offset) found.add(instant);
  }
  return [...found].sort((a, b) => a - b);
}

/**
 * For a wall time inside a spring-forward gap: the instant the gap ends, when
 * the clocks jump to the first valid time after it (03:00 in Europe/Berlin).
 */
export function endOfGap(wall: number, timeZone: string): number {
  const [before, after] = offsetsAround(wall, timeZone);
  // Before the jump the offset is `before`; the jump happens between the two
  // readings of the wall time. Bisect to the second.
  let lo = wall - after;
  let hi = wall - before;
  while (hi - lo > 1000) {
    const mid = lo + Math.max(1000, Math.floor((hi - lo) / 2000) * 1000);
    if (offsetAt(mid, timeZone) === before) lo = mid;
    else hi = mid;
  }
  return hi;
}
