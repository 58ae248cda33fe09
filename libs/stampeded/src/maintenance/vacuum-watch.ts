/**
 * Where a table stands with autovacuum:
 * - clean: its dead tuples are under autovacuum's threshold for it;
 * - due: over it, and autovacuum is on for it: its next round vacuums the
 *   table. Nothing is wrong: a busy queue table is due moments after each
 *   vacuum, and a new one is due until autovacuum's first pass;
 * - overdue: due since more than OVERDUE_NAPTIMES of autovacuum's rounds
 *   with no vacuum of it meanwhile: autovacuum is not reaching it (starved
 *   by its cost limit, its workers busy elsewhere, or blocked by a lock);
 * - off: due, and autovacuum will never visit it (turned off for the table
 *   or the server, or the statistics it decides by are not collected).
 * Only overdue and off are warnings.
 */
export type VacuumStanding = 'clean' | 'due' | 'overdue' | 'off';

/** What the rule reads of a table: the schema's vacuum health row and the server's autovacuum settings for it. */
export interface VacuumReading {
  relname: string;
  /** Dead tuples past autovacuum's own threshold (stampeded_vacuum_health). */
  needsVacuum: boolean;
  autovacuumEnabled: boolean;
  /** The table's last vacuum, by autovacuum or by hand; null when none is recorded. */
  lastVacuumed: Date | null;
  /** autovacuum_naptime: how often autovacuum starts a round in each database. */
  naptimeSecs: number;
}

/** Rounds of autovacuum a due table may wait before it is overdue: one missed round is a busy moment, three are not. */
export const OVERDUE_NAPTIMES = 3;

/** The standings that mean something is wrong. */
export const VACUUM_WARNINGS: ReadonlySet<VacuumStanding> = new Set<VacuumStanding>(['overdue', 'off']);

/**
 * The one rule for a table's vacuum standing, for the leader's health
 * checks, the dashboard and the CLI. How long a table has been due is
 * nothing the statistics keep, so a watch remembers when it first saw each
 * table due and the vacuum it had then; a table it has not watched for long
 * enough is at most due, unless autovacuum is off for it. A watch per
 * reader (a process's maintenance service, a dashboard): none is shared.
 */
export class VacuumWatch {
  private readonly dueSince = new Map<string, { since: Date; lastVacuumed: number }>();

  /** Each table's standing now, and since when this watch has seen it due (null when it is not). */
  observe(readings: VacuumReading[], now = new Date()): { relname: string; standing: VacuumStanding; dueSince: Date | null }[] {
    const seen = new Set<string>();
    const result = readings.map((r) => {
      seen.add(r.relname);
      if (!r.needsVacuum) {
        this.dueSince.delete(r.relname);
        return { relname: r.relname, standing: 'clean' as const, dueSince: null };
      }
      const vacuumed = r.lastVacuumed?.getTime() ?? 0;
      let entry = this.dueSince.get(r.relname);
      // A vacuum since the table was first seen due: due again, from now.
      if (!entry || entry.lastVacuumed !== vacuumed) {
        entry = { since: now, lastVacuumed: vacuumed };
        this.dueSince.set(r.relname, entry);
      }
      const standing: VacuumStanding = !r.autovacuumEnabled
        ? 'off'
        : now.getTime() - entry.since.getTime() > OVERDUE_NAPTIMES * r.naptimeSecs * 1000
          ? 'overdue'
          : 'due';
      return { relname: r.relname, standing, dueSince: entry.since };
    });
    for (const relname of [...this.dueSince.keys()]) if (!seen.has(relname)) this.dueSince.delete(relname);
    return result;
  }
}
