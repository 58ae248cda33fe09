import { Logger, type Provider } from '@nestjs/common';
import type { PoolConfig } from 'pg';
import type { DataSource } from 'typeorm';
import { STAMPEDED_OPTIONS } from '../stampeded.constants.js';
import { NO_DATA_SOURCE, SCHEMA_BEHIND, SCHEMA_NOT_MIGRATED, SEED_NOT_ADOPTED } from '../stampeded.messages.js';
import { StampededConfigError } from '../errors/stampeded.errors.js';
import { assertSchemaName, assertServerVersion, pendingChanges } from '../sql/migrations/migrations.js';
import { migrate } from '../sql/migrations/migrate.js';
import { SEED_TABLES_PRESENT } from '../sql/migrations/runner.sql.js';
import { StampededDatabase, type SessionSupport } from './stampeded-database.js';
import { ReadDatabase } from './read-database.js';
import { connectionSettingsOf } from './data-source-connection.js';
import { dataSourceDependency } from './typeorm-token.js';
import type { ConnectionOptions, StampededModuleOptions } from '../interfaces/stampeded-options.interface.js';

const logger = new Logger('Stampeded');

function poolConfigFrom(options: StampededModuleOptions, dataSource: DataSource | undefined): PoolConfig {
  if (options.connection) return connectionConfig(options.connection);
  if (!dataSource) throw new StampededConfigError(NO_DATA_SOURCE(options.dataSource));
  return connectionSettingsOf(dataSource);
}

/** Whether the schema holds the seed's jobs table, as an install that no migration of ours recorded (another runtime's) does. */
async function seedTablesIn(run: (text: string, params?: unknown[]) => Promise<Record<string, unknown>[]>, schema: string): Promise<boolean> {
  const [row] = await run(SEED_TABLES_PRESENT, [schema]);
  return row.present === true;
}

/** What the connections may rely on: a transaction-mode pooler keeps no session between transactions. */
export function sessionSupport(options: StampededModuleOptions): SessionSupport {
  if (options.pooler === undefined) return {};
  const pooler = options.pooler === 'transaction' ? { mode: 'transaction' as const } : options.pooler;
  const listen = options.listenConnection ? connectionConfig(options.listenConnection) : undefined;
  return {
    session: false,
    prepared: pooler.preparedStatements ?? false,
    ...(listen ? { listen: { ...listen, application_name: 'stampeded-listen' } } : {}),
  };
}

function connectionConfig(connection: ConnectionOptions): PoolConfig {
  const { url, ...rest } = connection;
  return url ? { connectionString: url, ...rest } : rest;
}

/**
 * Builds Stampeded's pool from the app's TypeORM DataSource (the default, or
 * the one named) or from `connection`, and checks -- or with migrations:
 * 'auto', brings -- the schema up to date before anything else runs.
 */
/** The DataSource that forRoot({ dataSource }) named; absent for a plain import. */
export const STAMPEDED_DATA_SOURCE = Symbol('STAMPEDED_DATA_SOURCE');
/** The DataSource that forRoot({ readConnection: name }) named; absent otherwise. */
export const STAMPEDED_READ_DATA_SOURCE = Symbol('STAMPEDED_READ_DATA_SOURCE');

export function createDatabaseProvider(): Provider {
  return {
    provide: StampededDatabase,
    // The replica's DataSource too (unused here): a missing one fails the start before this pool opens.
    inject: [
      STAMPEDED_OPTIONS,
      { token: STAMPEDED_DATA_SOURCE, optional: true },
      dataSourceDependency(),
      { token: STAMPEDED_READ_DATA_SOURCE, optional: true },
    ],
    useFactory: async (options: StampededModuleOptions, named?: DataSource | null, fallback?: DataSource) => {
      const dataSource = options.dataSource ? (named ?? undefined) : (named ?? fallback);
      const schema = options.schema ?? 'public';
      assertSchemaName(schema);
      const config: PoolConfig = {
        ...poolConfigFrom(options, dataSource),
        max: options.poolSize ?? 10,
        application_name: 'stampeded',
      };
      const db = new StampededDatabase(config, schema, sessionSupport(options));
      try {
        const run = async (text: string, params?: unknown[]) => db.raw(text, params);
        await assertServerVersion(run);
        if (options.migrations === 'auto') {
          const applied = await migrate(config, { schema });
          if (applied.adopted) logger.log(`adopted the seed schema ("stampeded 0.3.1") already installed in schema "${schema}" as migration 1`);
          if (applied.migrations.length) logger.log(`migrated schema "${schema}": ${applied.migrations.map((m) => `${m.version}_${m.name}`).join(', ')}`);
          if (applied.functions.length) logger.log(`updated functions in schema "${schema}": ${applied.functions.join(', ')}`);
        }
        const pending = await pendingChanges(run, schema);
        if (!pending) throw new StampededConfigError((await seedTablesIn(run, schema)) ? SEED_NOT_ADOPTED(schema) : SCHEMA_NOT_MIGRATED(schema));
        if (pending.migrations.length || pending.functions.length) throw new StampededConfigError(SCHEMA_BEHIND(schema, pending));
        return db;
      } catch (err) {
        await db.close();
        throw err;
      }
    },
  };
}

/** A few: the dashboard's pages and a scrape read a handful of statements at once. */
const READ_POOL_SIZE = 5;
/** A replica that does not accept a connection by then is taken as down, and the page reads the primary. */
const READ_CONNECT_TIMEOUT_MS = 3_000;

/** Whether readConnection is a TypeORM DataSource rather than connection options. */
export function isDataSource(value: unknown): value is DataSource {
  return (
    typeof value === 'object' && value !== null && typeof (value as DataSource).initialize === 'function' && typeof (value as DataSource).options === 'object'
  );
}

/**
 * Where the reads that may lag go (ReadDatabase): a pool of its own on the
 * replica that `readConnection` gives, or the primary. Nothing is checked on
 * the replica at startup: one that is down, or still being rebuilt, leaves
 * the app starting, its reads on the primary until it answers.
 */
export function createReadDatabaseProvider(): Provider {
  return {
    provide: ReadDatabase,
    inject: [STAMPEDED_OPTIONS, StampededDatabase, { token: STAMPEDED_READ_DATA_SOURCE, optional: true }],
    useFactory: (options: StampededModuleOptions, primary: StampededDatabase, named?: DataSource | null) => {
      // A name, given to forRoot() or beside forRootAsync()'s factory, is resolved by DI (STAMPEDED_READ_DATA_SOURCE).
      const source = named ?? options.readConnection;
      if (source === undefined) return new ReadDatabase(primary);
      if (typeof source === 'string') throw new StampededConfigError(NO_DATA_SOURCE(source));
      const settings = isDataSource(source) ? connectionSettingsOf(source, true) : connectionConfig(source);
      const config: PoolConfig = {
        ...settings,
        connectionTimeoutMillis: settings.connectionTimeoutMillis ?? READ_CONNECT_TIMEOUT_MS,
        max: READ_POOL_SIZE,
        application_name: 'stampeded-reads',
      };
      return new ReadDatabase(primary, new StampededDatabase(config, primary.schema, { session: false, prepared: primary.prepared }), logger);
    },
  };
}
