import type { PoolConfig } from 'pg';
import type { DataSource } from 'typeorm';
import { connectionSettingsOf } from '../../database/data-source-connection.js';
import { clientFor } from '../../database/stampeded-database.js';
import { applyMigrations, type AppliedChanges } from './migrations.js';
import type { MigrationFile } from './migration-files.js';

export interface MigrateOptions {
  /** The Postgres schema to install into; created when missing. Default: public. */
  schema?: string;
  /** Told of each migration as it is applied. */
  onApplied?: (migration: MigrationFile) => void;
}

/** Where to migrate: a connection string, pg pool settings, or a TypeORM DataSource (its connection settings are used). */
export type MigrateTarget = string | PoolConfig | DataSource;

export function connectionConfigOf(target: MigrateTarget): PoolConfig {
  if (typeof target === 'string') return { connectionString: target };
  if ('isInitialized' in target) return connectionSettingsOf(target);
  return target;
}

/**
 * Brings a schema up to the latest migration in one transaction: all of them
 * or, on any error, none. Returns the migrations it applied and the SQL
 * functions whose definitions it created or replaced.
 */
export async function migrate(target: MigrateTarget, options: MigrateOptions = {}): Promise<AppliedChanges> {
  const client = clientFor(connectionConfigOf(target));
  await client.connect();
  try {
    await client.query('BEGIN');
    const applied = await applyMigrations(async (text, params) => (await client.query(text, params)).rows, {
      schema: options.schema ?? 'public',
      onApplied: options.onApplied,
    });
    await client.query('COMMIT');
    return applied;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    await client.end();
  }
}
