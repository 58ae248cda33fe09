/**
 * Where the scheduler reads the time. The default is the database's own
 * clock (every process of a fleet then agrees); a test passes a clock it can
 * move -- TestClock from @stampeded/testing -- and the scheduler asks
 * PostgreSQL about due schedules "as of" that clock's time.
 */
export interface StampededClock {
  now(): Date;
}
