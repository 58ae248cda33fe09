import type { MaintenanceHealth, VacuumHealth } from '../interfaces/maintenance.interface.js';
import { vacuumBehind } from './health-reporter.js';

const table = (relname: string, needsVacuum: boolean, lastAutovacuum: string | null): VacuumHealth => ({
  relname,
  liveTuples: 50_000,
  deadTuples: needsVacuum ? 5_000 : 10,
  deadRatio: needsVacuum ? 0.1 : 0.0002,
  autovacThreshold: 1_050,
  needsVacuum,
  lastAutovacuum: lastAutovacuum === null ? null : new Date(lastAutovacuum),
});

const check = (...vacuum: VacuumHealth[]): MaintenanceHealth => ({
  at: new Date(),
  leader: true,
  vacuum,
  needsVacuum: vacuum.filter((v) => v.needsVacuum).map((v) => v.relname),
  indexes: [],
  sparseIndexes: [],
  partitions: [],
  brokenPartitions: [],
});

describe('vacuumBehind', () => {
  it('says nothing on the first check: a flagged table may be one autovacuum is about to visit', () => {
    expect(vacuumBehind(undefined, check(table('stampeded_jobs_emails', true, null)))).toEqual([]);
  });

  it('says nothing of a busy table that autovacuum visited between two checks that both flagged it', () => {
    const before = check(table('stampeded_jobs_default', true, '2026-12-05T10:00:00Z'));
    const after = check(table('stampeded_jobs_default', true, '2026-12-05T10:04:10Z'));
    expect(vacuumBehind(before, after)).toEqual([]);
  });

  it('names a table flagged at two checks in a row that autovacuum did not visit between them', () => {
    const before = check(table('stampeded_jobs_default', true, '2026-12-05T09:00:00Z'), table('stampeded_jobs_emails', true, null));
    const after = check(table('stampeded_jobs_default', true, '2026-12-05T09:00:00Z'), table('stampeded_jobs_emails', true, null));
    expect(vacuumBehind(before, after)).toEqual(['stampeded_jobs_default', 'stampeded_jobs_emails']);
  });

  it('says nothing of a table that no longer needs a vacuum, or did not at the previous check', () => {
    const before = check(table('stampeded_jobs_default', true, null), table('stampeded_jobs_emails', false, null));
    const after = check(table('stampeded_jobs_default', false, null), table('stampeded_jobs_emails', true, null));
    expect(vacuumBehind(before, after)).toEqual([]);
  });
});
