import type { MigrationInterface, QueryRunner } from 'typeorm';
import { createHash } from 'node:crypto';
import { applyMigrations, type SqlRunner } from './migrations.js';
import { loadFunctionFiles } from './function-files.js';
import { MIGRATION_FILES } from './migration-files.js';
import { MIGRATION_NOT_REVERSIBLE } from '../../stampeded.messages.js';

function runnerOf(queryRunner: QueryRunner): SqlRunner {
  return async (text, params) => {
    const result = await queryRunner.query(text, params);
    return Array.isArray(result) ? result : [];
  };
}

/** TypeORM orders and records migrations by the 13-digit timestamp that ends a class's name. */
const BASE_TIMESTAMP = 1764633600000;

function migrationClass(version: number | 'functions', name: string, schema?: string): new () => MigrationInterface {
  const className = version === 'functions' ? name : `Stampeded${pascal(name)}${BASE_TIMESTAMP + version}`;
  const holder = {
    [className]: class implements MigrationInterface {
      name = className;
      async up(queryRunner: QueryRunner): Promise<void> {
        await applyMigrations(runnerOf(queryRunner), { schema, upTo: version === 'functions' ? undefined : version });
      }
      async down(): Promise<void> {
        throw new Error(MIGRATION_NOT_REVERSIBLE(className));
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
  return [...MIGRATION_FILES.map((m) => migrationClass(m.version, m.name, options.schema)), migrationClass('functions', functionsClassName(), options.schema)];
}

/**
 * The SQL functions change without a numbered migration, and TypeORM runs a
 * class once: the class that applies them is named for their text, so a
 * version whose functions differ brings a class TypeORM has not run. (A
 * server upgraded under the install brings none: its functions keep the
 * forms they have, which run there, until migrate() or `stampeded migrate`.)
 */
function functionsClassName(): string {
  const hash = createHash('sha256');
  for (const f of loadFunctionFiles()) {
    hash.update(`${f.name}:${f.checksum}\n`);
    // A form for older servers changes the class too.
    for (const [below, form] of [...f.before].sort(([a], [b]) => a - b)) hash.update(`${f.name}.pre${below}:${form.checksum}\n`);
  }
  return `StampededFunctions${hash.digest('hex').slice(0, 12)}${BASE_TIMESTAMP + 999}`;
}

function pascal(name: string): string {
  return name.replace(/(^|_)([a-z])/g, (_m, _sep, c: string) => c.toUpperCase());
}
