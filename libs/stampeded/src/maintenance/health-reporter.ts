import type { StampededDatabase } from '../database/stampeded-database.js';
import { INDEX_DENSITY, PARTITION_HEALTH, VACUUM_HEALTH } from '../sql/maintenance.sql.js';
import type { MaintenanceHealth } from '../interfaces/maintenance.interface.js';
import { VACUUM_WARNINGS, type VacuumReading, type VacuumWatch } from './vacuum-watch.js';

/** The schema's three health reports, as one structured snapshot; each table's vacuum standing is the watch's. */
export async function takeHealthSnapshot(db: StampededDatabase, leader: boolean, watch: VacuumWatch): Promise<MaintenanceHealth> {
  const [vacuum, indexes, partitions] = await Promise.all([db.query(VACUUM_HEALTH), db.query(INDEX_DENSITY), db.query(PARTITION_HEALTH)]);
  const at = new Date();
  const standings = watch.observe(vacuum.map(vacuumReading), at);
  const snapshot: MaintenanceHealth = {
    at,
    leader,
    vacuum: vacuum.map((r, i) => ({
      relname: r.relname,
      liveTuples: Number(r.live_tuples),
      deadTuples: Number(r.dead_tuples),
      deadRatio: Number(r.dead_ratio),
      autovacThreshold: Number(r.autovac_threshold),
      needsVacuum: r.needs_vacuum,
      lastAutovacuum: r.last_autovacuum ?? null,
      lastVacuum: r.last_vacuum ?? null,
      autovacuumEnabled: r.autovacuum_enabled,
      standing: standings[i].standing,
      dueSince: standings[i].dueSince,
    })),
    needsVacuum: [],
    vacuumBehind: [],
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
  snapshot.vacuumBehind = snapshot.vacuum.filter((v) => VACUUM_WARNINGS.has(v.standing)).map((v) => v.relname);
  snapshot.sparseIndexes = snapshot.indexes.filter((i) => i.sparse).map((i) => i.indexName);
  snapshot.brokenPartitions = snapshot.partitions.filter((p) => !p.hasNotify || !p.hasCounts).map((p) => p.partition);
  return snapshot;
}

/** A row of VACUUM_HEALTH as the vacuum rule reads it: the later of its last vacuum by autovacuum and by hand. */
export function vacuumReading(row: Record<string, any>): VacuumReading {
  const times = [row.last_autovacuum, row.last_vacuum].filter(Boolean).map((t) => new Date(t).getTime());
  return {
    relname: row.relname,
    needsVacuum: Boolean(row.needs_vacuum),
    autovacuumEnabled: Boolean(row.autovacuum_enabled),
    lastVacuumed: times.length ? new Date(Math.max(...times)) : null,
    naptimeSecs: Number(row.naptime_secs),
  };
}
