import { VACUUM_HEALTH, VacuumWatch, vacuumReading } from '@stampeded/nestjs/internal';
import { INDEX_DENSITY, MAINTENANCE_LEADER, PARTITION_HEALTH, SCHEMA_VERSIONS, SERVER_VERSION } from '../sql/health.sql.js';
import { RUNNING_JOBS, WORKERS } from '../sql/workers.sql.js';
import type { InspectorDatabase } from './inspector-database.js';

export interface InstallHealth {
  server: { version: string; num: number };
  migrations: { version: number; name: string; applied_at: Date }[];
  /** The schema's vacuum health rows, each with its `standing` and `due_since` by the core's vacuum rule (VacuumWatch). */
  vacuum: Record<string, unknown>[];
  indexes: Record<string, unknown>[];
  partitions: Record<string, unknown>[];
  /** Whether a process holds this schema's maintenance leader lock now. */
  maintenanceLeader: boolean;
}

/** The install itself: its server, schema, tables' health, and the workers that run against it. */
export class InstallInspector {
  /** This inspector's memory of when it first saw each table due: a dashboard's second look tells due from overdue. */
  private readonly vacuumWatch = new VacuumWatch();

  constructor(private readonly db: InspectorDatabase) {}

  async health(): Promise<InstallHealth> {
    const [[server], migrations, vacuum, indexes, partitions, [leader]] = await Promise.all([
      this.db.query<{ version: string; num: number }>(SERVER_VERSION),
      this.db.query<{ version: number; name: string; applied_at: Date }>(SCHEMA_VERSIONS),
      this.db.query(VACUUM_HEALTH),
      this.db.query(INDEX_DENSITY),
      this.db.query(PARTITION_HEALTH),
      this.db.query<{ present: boolean }>(MAINTENANCE_LEADER, [this.db.schema]),
    ]);
    const standings = this.vacuumWatch.observe(vacuum.map(vacuumReading));
    return {
      server,
      migrations,
      vacuum: vacuum.map((row, i) => ({ ...row, standing: standings[i].standing, due_since: standings[i].dueSince })),
      indexes,
      partitions,
      maintenanceLeader: leader.present,
    };
  }

  async workers(): Promise<{ workers: Record<string, unknown>[]; running: Record<string, unknown>[] }> {
    const [workers, running] = await Promise.all([this.db.query(WORKERS), this.db.query(RUNNING_JOBS, [200])]);
    return { workers, running };
  }
}
