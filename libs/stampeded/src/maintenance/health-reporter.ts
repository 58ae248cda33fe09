import type { StampededDatabase } from '../database/stampeded-database.js';
import { INDEX_DENSITY, PARTITION_HEALTH, VACUUM_HEALTH } from '../sql/maintenance.sql.js';
import type { MaintenanceHealth } from '../interfaces/maintenance.interface.js';

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
