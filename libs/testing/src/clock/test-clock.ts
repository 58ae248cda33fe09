import type { StampededClock } from '@stampeded/nestjs';
import { durationMs } from '@stampeded/nestjs/internal';
import { NOT_A_DATE, NOT_A_DURATION } from '../testing.messages.js';

/**
 * A clock that only moves when the test moves it. Give it to the module
 * (`StampededModule.forRoot({ clock })`) and the scheduler asks PostgreSQL
 * which schedules are due "as of" this clock, so a test can step through a
 * DST night or a week of downtime in milliseconds:
 *
 * @example
 * const clock = new TestClock('2026-10-24T23:59:00Z');
 * const app = await bootApp(url, { stampeded: { clock, schedules: { enabled: false } } });
 * clock.advance('1h');
 * await app.get(SchedulesService).fireDue();
 */
export class TestClock implements StampededClock {
  private current: number;

  constructor(start: Date | string | number = Date.now()) {
    this.current = new Date(start).getTime();
    if (Number.isNaN(this.current)) throw new Error(NOT_A_DATE('new TestClock()', start));
  }

  now(): Date {
    return new Date(this.current);
  }

  set(to: Date | string | number): Date {
    const next = new Date(to).getTime();
    if (Number.isNaN(next)) throw new Error(NOT_A_DATE('TestClock.set()', to));
    this.current = next;
    return this.now();
  }

  /** Moves forward by milliseconds or a duration such as '90s', '1h', '7d', '1h30m', read as the module's options are. */
  advance(by: number | string): Date {
    this.current += typeof by === 'number' ? by : durationMs('TestClock.advance()', by, () => NOT_A_DURATION(by));
    return this.now();
  }
}
