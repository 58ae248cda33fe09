import { sql } from '@stampeded/nestjs/internal';

export const SERVER_VERSION = sql(
  'dashboard_server_version',
  `SELECT current_setting('server_version') AS version, current_setting('server_version_num')::int AS num`,
);

export const SCHEMA_VERSIONS = sql('dashboard_schema_versions', `SELECT version, name, applied_at FROM stampeded_schema_migrations ORDER BY version`);

export const INDEX_DENSITY = sql('dashboard_index_density', `SELECT * FROM stampeded_index_density()`);

export const PARTITION_HEALTH = sql('dashboard_partition_health', `SELECT * FROM stampeded_partition_health()`);

/**
 * Whether this schema has a maintenance leader: some session holds its
 * leader lock -- the session advisory lock that @stampeded/nestjs's leader
 * election takes on hashtextextended('stampeded.maintenance.' || schema); a
 * bigint advisory key shows in pg_locks as classid (high 32 bits) and objid
 * (low 32 bits) with objsubid 1 -- or, behind a transaction-mode pooler, a
 * process holds an unexpired lease (stampeded_leader_leases, migration 12).
 */
export const MAINTENANCE_LEADER = sql(
  'dashboard_maintenance_leader',
  `SELECT EXISTS (
       SELECT 1 FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND objsubid = 1
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND ((classid::bigint << 32) | objid::bigint) = hashtextextended('stampeded.maintenance.' || $1::text, 0)
   ) OR EXISTS (SELECT 1 FROM stampeded_leader_leases WHERE name = 'maintenance' AND expires_at > now()) AS present`,
);
