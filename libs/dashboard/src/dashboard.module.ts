import { Controller, Module, type CanActivate, type DynamicModule, type Provider, type Type } from '@nestjs/common';
import { ReadDatabase, StampededDatabase } from '@stampeded/nestjs/internal';
import { StampededInstances } from '@stampeded/nestjs/internal-runtime';
import { DASHBOARD_OPTIONS, DEFAULT_PATH } from './dashboard.constants.js';
import { AUTH_REQUIRED, BAD_AUTH, BAD_PATH, UNKNOWN_DASHBOARD_OPTIONS, BAD_REFRESH_SECONDS, NO_STAMPEDED } from './dashboard.messages.js';
import { DashboardAuthGuard } from './auth/dashboard-auth.guard.js';
import { CsrfGuard } from './auth/csrf.guard.js';
import { DashboardApiController } from './controllers/dashboard-api.controller.js';
import { DashboardPagesController } from './controllers/dashboard-pages.controller.js';
import { InspectorErrorFilter } from './controllers/inspector-error.filter.js';
import { StampededInspector } from './inspector/stampeded-inspector.js';
import { forInstances, forRootInstance, instanceInspectorProviders, INSTANCES_SEGMENT } from './instances/instance-inspectors.js';
import { rootInstanceDatabases } from './instances/root-instance.js';
import type { ResolvedDashboardOptions, StampededDashboardOptions } from './interfaces/dashboard-options.interface.js';

const OPTION_NAMES = ['path', 'auth', 'readOnly', 'refreshSeconds'] as const;

/** Thrown at module creation, so a dashboard without auth never starts. */
export class DashboardConfigError extends Error {
  override name = 'DashboardConfigError';
}

export function resolveDashboardOptions(options: StampededDashboardOptions | undefined): ResolvedDashboardOptions {
  if (!options || options.auth === undefined || options.auth === null) throw new DashboardConfigError(AUTH_REQUIRED());
  const unknown = Object.keys(options).filter((k) => !(OPTION_NAMES as readonly string[]).includes(k));
  if (unknown.length) throw new DashboardConfigError(UNKNOWN_DASHBOARD_OPTIONS(unknown, OPTION_NAMES));
  const rawPath = options.path ?? DEFAULT_PATH;
  if (typeof rawPath !== 'string' || !rawPath.startsWith('/') || /[?#\s:*()]/.test(rawPath)) throw new DashboardConfigError(BAD_PATH(rawPath));
  const path = rawPath.replace(/\/+$/, '');
  const auth = options.auth;
  let resolved: ResolvedDashboardOptions['auth'];
  if (typeof auth === 'function') {
    resolved =
      typeof (auth as Type<CanActivate>).prototype?.canActivate === 'function'
        ? { kind: 'guard', guard: auth as Type<CanActivate> }
        : { kind: 'function', check: auth as (r: any) => boolean };
  } else if (typeof auth === 'object' && typeof auth.username === 'string' && typeof auth.password === 'string') {
    // An empty password is a door left open with a sign on it.
    if (!auth.username || !auth.password) throw new DashboardConfigError(BAD_AUTH('basic credentials with an empty username or password'));
    resolved = { kind: 'basic', username: auth.username, password: auth.password };
  } else {
    throw new DashboardConfigError(BAD_AUTH(typeof auth === 'object' ? `an object with keys ${Object.keys(auth).join(', ') || '(none)'}` : typeof auth));
  }
  const refreshSeconds = options.refreshSeconds ?? 5;
  if (!Number.isInteger(refreshSeconds) || refreshSeconds < 0) throw new DashboardConfigError(BAD_REFRESH_SECONDS(refreshSeconds));
  return { path, auth: resolved, readOnly: options.readOnly ?? false, refreshSeconds };
}

/** The controller class, subclassed so that its routes live under the configured path. */
function mountAt<T extends Type<object>>(base: T, path: string): T {
  const mounted = class extends base {};
  Object.defineProperty(mounted, 'name', { value: `${base.name}At${path.replace(/[^A-Za-z0-9]/g, '_')}` });
  Controller(path)(mounted);
  return mounted;
}

/**
 * The web dashboard and its JSON API, in the app's own Nest HTTP server.
 * Needs StampededModule in the app (it reads through Stampeded's own
 * connections: its lists, counts and charts through the replica that
 * StampededModule's readConnection sets, if any) and the Express platform.
 *
 * ```ts
 * StampededDashboardModule.forRoot({ path: '/stampeded', auth: { username: 'ops', password: process.env.DASHBOARD_PASSWORD! } })
 * ```
 */
@Module({})
export class StampededDashboardModule {
  static forRoot(options: StampededDashboardOptions): DynamicModule {
    const resolved = resolveDashboardOptions(options);
    const providers: Provider[] = [
      { provide: DASHBOARD_OPTIONS, useValue: resolved },
      {
        provide: StampededInspector,
        inject: [
          { token: StampededDatabase, optional: true },
          { token: ReadDatabase, optional: true },
          { token: StampededInstances, optional: true },
        ],
        useFactory: (db?: StampededDatabase, reads?: ReadDatabase, instances?: StampededInstances) => {
          if (db) return new StampededInspector(db, reads?.replicated ? reads : undefined);
          // An app with only named instances: the dashboard's own path serves the first of them (rootInstance()).
          if (!instances) throw new DashboardConfigError(NO_STAMPEDED('StampededDashboardModule'));
          const root = rootInstanceDatabases(instances);
          return new StampededInspector(root.db, root.reads);
        },
      },
      ...instanceInspectorProviders,
      DashboardAuthGuard,
      CsrfGuard,
      InspectorErrorFilter,
      ...(resolved.auth.kind === 'guard' ? [resolved.auth.guard] : []),
    ];
    return {
      module: StampededDashboardModule,
      controllers: [
        forRootInstance(mountAt(DashboardApiController, `${resolved.path}/api`), 1),
        forRootInstance(mountAt(DashboardPagesController, resolved.path || '/'), 3),
        // A named instance's pages and API, under <path>/instances/<name>: the default instance's URLs stay as they were.
        forInstances(mountAt(DashboardApiController, `${resolved.path}/${INSTANCES_SEGMENT}/:instance/api`), 1),
        forInstances(mountAt(DashboardPagesController, `${resolved.path}/${INSTANCES_SEGMENT}/:instance`), 3),
      ],
      providers,
      exports: [StampededInspector],
    };
  }
}
