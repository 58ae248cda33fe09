import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** A token nothing provides: an optional dependency on it is undefined. */
const TYPEORM_NOT_LOADED = Symbol('TypeORM is not loaded');

/**
 * The token @nestjs/typeorm registers a DataSource under (its
 * getDataSourceToken): the DataSource class for the default one,
 * `<name>DataSource` for a named one.
 *
 * The class is taken from TypeORM as the app loaded it, and only when Nest
 * resolves the dependency: by then every module of the app has been
 * imported, so an app that uses TypeOrmModule has loaded TypeORM, and one
 * that has not cannot have a DataSource to offer. Importing
 * @nestjs/typeorm here instead would load all of TypeORM into every process
 * that imports Stampeded, workers with a connection of their own included
 * (bench/RESULTS.md has what that costs a worker's memory). @nestjs/typeorm
 * and typeorm are optional peers; with `connection`, neither is needed.
 */
export function dataSourceToken(name?: string): string | symbol | (abstract new (...args: never[]) => unknown) {
  if (name !== undefined && name !== 'default') return `${name}DataSource`;
  let path: string;
  try {
    path = require.resolve('typeorm');
  } catch {
    return TYPEORM_NOT_LOADED;
  }
  const loaded = require.cache[path]?.exports as { DataSource?: abstract new (...args: never[]) => unknown } | undefined;
  return loaded?.DataSource ?? TYPEORM_NOT_LOADED;
}

/** An optional factory dependency on that DataSource, its token read when Nest resolves it. */
export function dataSourceDependency(name?: string): { readonly token: ReturnType<typeof dataSourceToken>; optional: true } {
  return {
    get token() {
      return dataSourceToken(name);
    },
    optional: true,
  };
}
