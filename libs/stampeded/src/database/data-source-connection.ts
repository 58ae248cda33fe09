import type { PoolConfig } from 'pg';
import type { DataSource } from 'typeorm';
import { StampededConfigError } from '../errors/stampeded.errors.js';
import { NOT_POSTGRES } from '../stampeded.messages.js';

/**
 * The connection settings of a TypeORM DataSource, read from its public
 * `options` the way TypeORM's Postgres driver maps them onto its pg pool
 * (the writer's credentials when it replicates; for `reader`, as a
 * readConnection asks, its first replica's), so Stampeded's own pool
 * connects exactly as the app's does. The pool's size is Stampeded's own:
 * `poolSize` and the `max`/`min` of `extra` stay the app's.
 */
export function connectionSettingsOf(dataSource: DataSource, reader = false): PoolConfig {
  const options = dataSource.options;
  if (options.type !== 'postgres') throw new StampededConfigError(NOT_POSTGRES(options.type));
  const credentials = (reader ? options.replication?.slaves?.[0] : options.replication?.master) ?? options;
  const { max: _max, min: _min, ...extra } = (options.extra ?? {}) as PoolConfig;
  return {
    connectionString: credentials.url,
    host: credentials.host,
    user: credentials.username,
    password: credentials.password,
    database: credentials.database,
    port: credentials.port,
    // TypeORM types it as TLS server options; pg takes the same object as its client's.
    ssl: credentials.ssl as PoolConfig['ssl'],
    connectionTimeoutMillis: options.connectTimeoutMS,
    application_name: options.applicationName ?? credentials.applicationName,
    ...extra,
  };
}
