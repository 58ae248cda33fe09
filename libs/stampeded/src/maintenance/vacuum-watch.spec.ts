import { VacuumWatch, type VacuumReading } from './vacuum-watch.js';

const reading = (over: Partial<VacuumReading> = {}): VacuumReading => ({
  relname: 'stampeded_jobs_emails',
  needsVacuum: true,
  autovacuumEnabled: true,
  lastVacuumed: null,
  naptimeSecs: 60,
  ...over,
});
const at = (minutes: number) => new Date(Date.UTC(2026, 0, 1, 10, minutes));
const standing = (watch: VacuumWatch, r: VacuumReading, minutes: number) => watch.observe([r], at(minutes))[0].standing;

describe('VacuumWatch', () => {
  it('calls a table past its threshold due, not a warning, while autovacuum has had fewer than three rounds to visit it', () => {
    const watch = new VacuumWatch();
    expect(standing(watch, reading(), 0)).toBe('due');
    expect(standing(watch, reading(), 3)).toBe('due');
  });

  it('calls it overdue once it has been due for three of autovacuum rounds with no vacuum of it', () => {
    const watch = new VacuumWatch();
    standing(watch, reading(), 0);
    expect(standing(watch, reading(), 4)).toBe('overdue');
    expect(standing(watch, reading({ naptimeSecs: 120 }), 4)).toBe('due');
  });

  it('starts again from a vacuum: a busy table due again after each vacuum is never overdue', () => {
    const watch = new VacuumWatch();
    standing(watch, reading(), 0);
    expect(standing(watch, reading({ lastVacuumed: at(2) }), 4)).toBe('due');
    expect(standing(watch, reading({ lastVacuumed: at(5) }), 8)).toBe('due');
    expect(standing(watch, reading({ lastVacuumed: at(5) }), 12)).toBe('overdue');
  });

  it('forgets a table once it is clean, and a table no longer reported', () => {
    const watch = new VacuumWatch();
    standing(watch, reading(), 0);
    expect(standing(watch, reading({ needsVacuum: false }), 2)).toBe('clean');
    expect(standing(watch, reading(), 5)).toBe('due');
    watch.observe([], at(6));
    expect(standing(watch, reading(), 9)).toBe('due');
  });

  it('calls a due table autovacuum never visits off at once, and a clean one clean', () => {
    const watch = new VacuumWatch();
    expect(standing(watch, reading({ autovacuumEnabled: false }), 0)).toBe('off');
    expect(standing(watch, reading({ autovacuumEnabled: false, needsVacuum: false }), 0)).toBe('clean');
  });
});
