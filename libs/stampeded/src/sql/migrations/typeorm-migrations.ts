import type { MigrationInterface, QueryRunner } from 'typeorm';
import { applyMigrations, MIGRATION_FILES, type SqlRunner } from './migrations.js';

function runnerOf(queryRunner: QueryRunner): SqlRunner {
  return async (text, params) => {
    const result = await queryRunner.query(text, params);
    return Array.isArray(result) ? result : [];
  };
}

function migrationClass(version: number, name: string, schema?: string): new () => MigrationInterface {
  // TypeORM orders and records migrations by the timestamp that ends the name.
  const className = `Stampeded${name[0].toUpperCase()}${name.slice(1)}${1764633600000 + version}`;
  const holder = {
    [className]: class implements MigrationInterface {
      name = className;
      async up(queryRunner: QueryRunner): Promise<void> {
        await applyMigrations(runnerOf(queryRunner), { schema, upTo: version });
      }
      async down(): Promise<void> {
        throw new Error(
          `${className} cannot be reverted: Stampeded's migrations only go forward. ` +
            `To remove Stampeded, drop its schema (DROP SCHEMA ... CASCADE) after draining its jobs.`,
        );
      }
    },
  };
  return holder[className];
}

/**
 * Stampeded's migrations as TypeORM classes, for your own DataSource:
 * `migrations: [...stampededMigrations()]`. Without a schema they install into
 * the connection's current schema. Each migration is recorded in
 * stampeded_schema_migrations too, so this and StampededModule's
 * `migrations: 'auto'` can be used together without applying anything twice.
 */
export function stampededMigrations(options: { schema?: string } = {}): Array<new () => MigrationInterface> {
  return MIGRATION_FILES.map((m) => migrationClass(m.version, m.name, options.schema));
}
