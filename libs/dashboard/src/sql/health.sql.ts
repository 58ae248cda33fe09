import { sql } from './statement.js';

export const SERVER_VERSION = sql(
  'dashboard_server_version',
  `SELECT current_setting('server_version') AS version, current_setting('server_version_num')::int AS num`,
);

export const SCHEMA_VERSIONS = sql(
  'dashboard_schema_versions',
  `SELECT version, name, applied_at FROM stampeded_schema_migrations ORDER BY version`,
);

export const VACUUM_HEALTH = sql('dashboard_vacuum_health', `SELECT * FROM stampeded_vacuum_health()`);

export const INDEX_DENSITY = sql('dashboard_index_density', `SELECT * FROM stampeded_index_density()`);

export const PARTITION_HEALTH = sql('dashboard_partition_health', `SELECT * FROM stampeded_partition_health()`);
