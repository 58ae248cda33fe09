import type { StampededDatabase } from '../database/stampeded-database.js';
import { INDEX_DENSITY, PARTITION_HEALTH, VACUUM_HEALTH } from '../sql/maintenance.sql.js';
import type { MaintenanceHealth, VacuumHealth } from '../interfaces/maintenance.interface.js';

/** The schema's three health reports, as one structured snapshot. */
export async function takeHealthSnapshot(db: StampededDatabase, leader: boolean): Promise<MaintenanceHealth> {
  const [vacuum, indexes, partitions] = await Promise.all([db.query(VACUUM_HEALTH), db.query(INDEX_DENSITY), db.query(PARTITION_HEALTH)]);
  const snapshot: MaintenanceHealth = {
    at: new Date(),
    leader,
    vacuum: vacuum.map((r) => ({
      relname: r.relname,
      liveTuples: Number(r.live_tuples),
      deadTuples: Number(r.dead_tuples),
      deadRatio: Number(r.dead_ratio),
      autovacThreshold: Number(r.autovac_threshold),
      needsVacuum: r.needs_vacuum,
      lastAutovacuum: r.last_autovacuum ?? null,
    })),
    needsVacuum: [],
    indexes: indexes.map((r) => ({
      indexName: r.indexname,
      pages: Number(r.pages),
      entries: Number(r.entries),
      perPage: Number(r.per_page),
      sparse: r.sparse,
    })),
    sparseIndexes: [],
    partitions: partitions.map((r) => ({ partition: r.partition, queue: r.queue, hasNotify: r.has_notify, hasCounts: r.has_counts })),
    brokenPartitions: [],
  };
  snapshot.needsVacuum = snapshot.vacuum.filter((v) => v.needsVacuum).map((v) => v.relname);
  snapshot.sparseIndexes = snapshot.indexes.filter((i) => i.sparse).map((i) => i.indexName);
  snapshot.brokenPartitions = snapshot.partitions.filter((p) => !p.hasNotify || !p.hasCounts).map((p) => p.partition);
  return snapshot;
}

/**
 * The tables worth an operator's warning: those that needed a vacuum at the
 * previous health check and still do, with no autovacuum of them in between.
 * The flag alone is no sign of trouble on a queue table: a busy one passes
 * autovacuum's threshold moments after each vacuum, and is flagged at most
 * checks while autovacuum keeps up. A table flagged twice that autovacuum did
 * not visit meanwhile is one it is not reaching (turned off, starved by its
 * cost limit, or blocked by a lock).
 */
export function vacuumBehind(previous: MaintenanceHealth | undefined, current: MaintenanceHealth): string[] {
  if (!previous) return [];
  const before = new Map<string, VacuumHealth>(previous.vacuum.map((v) => [v.relname, v]));
  return current.vacuum
    .filter((now) => {
      const then = before.get(now.relname);
      if (!now.needsVacuum || !then?.needsVacuum) return false;
      return (now.lastAutovacuum?.getTime() ?? 0) === (then.lastAutovacuum?.getTime() ?? 0);
    })
    .map((v) => v.relname);
}
