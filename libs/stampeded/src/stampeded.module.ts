import { Global, Module, type DynamicModule, type Provider } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { STAMPEDED_OPTIONS } from './stampeded.constants.js';
import { STAMPEDED_DATA_SOURCE, STAMPEDED_READ_DATA_SOURCE } from './database/database.provider.js';
import { ReadDatabase } from './database/read-database.js';
import { dataSourceDependency } from './database/typeorm-token.js';
import type { DataSource } from 'typeorm';
import { QueueRegistry } from './queue/queue.registry.js';
import { QueueService } from './queue/queue.service.js';
import { Queue } from './queue/queue.js';
import { JobEvents } from './events/job-events.js';
import { TaskRegistry } from './explorer/task.registry.js';
import { WorkerOrchestrator } from './worker/worker.orchestrator.js';
import { MaintenanceService } from './maintenance/maintenance.service.js';
import { SchedulesService } from './scheduler/schedules.service.js';
import { QueueControlService } from './control/queue-control.service.js';
import { resolveMaintenanceConfig } from './maintenance/maintenance.config.js';
import { resolveSchedulesConfig } from './scheduler/schedules.config.js';
import { resolveControlConfig } from './control/control.config.js';
import { resolveTracingConfig } from './tracing/tracing.config.js';
import { StampededDatabase } from './database/stampeded-database.js';
import { getQueueToken } from './decorators/inject-queue.decorator.js';
import { defaultInstanceAlias, instanceProviders, namedInstanceModule } from './instances/instance.module.js';
import { StampededInstances, StampededInstancesModule, type StampededInstance } from './instances/stampeded-instances.js';
import { instanceHandleToken } from './instances/instance.tokens.js';
import { StampededConfigError } from './errors/stampeded.errors.js';
import { cipherOf } from './encryption/job-encryption.js';
import { DEFAULT_INSTANCE, instanceNameOf } from './stampeded.constants.js';
import {
  ASYNC_OPTIONS_SOURCE_REQUIRED,
  FLEET_EVENTS_NEED_LISTEN,
  INVALID_CLOCK_OPTION,
  INVALID_EVENTS_OPTION,
  INVALID_INSTANCE_NAME,
  INVALID_MIGRATIONS_OPTION,
  INVALID_POOLER_OPTION,
  INVALID_READ_CONNECTION,
  NO_DATA_SOURCE,
  INVALID_SCHEMA_OPTION,
  LISTEN_CONNECTION_WITHOUT_POOLER,
  NOT_A_WHOLE_NUMBER,
  RENAMED_OPTION,
  UNKNOWN_INSTANCE,
  UNKNOWN_OPTIONS,
} from './stampeded.messages.js';
import type {
  RegisterQueueOptions,
  StampededModuleAsyncOptions,
  StampededModuleOptions,
  StampededOptionsFactory,
} from './interfaces/stampeded-options.interface.js';

const CORE_EXPORTS = [
  QueueService,
  JobEvents,
  TaskRegistry,
  QueueRegistry,
  WorkerOrchestrator,
  MaintenanceService,
  SchedulesService,
  QueueControlService,
  STAMPEDED_OPTIONS,
];

const OPTION_NAMES = [
  'name',
  'schema',
  'dataSource',
  'connection',
  'migrations',
  'poolSize',
  'worker',
  'defaultJobOptions',
  'maintenance',
  'schedules',
  'clock',
  'control',
  'tracing',
  'events',
  'pooler',
  'listenConnection',
  'encryption',
  'readConnection',
];
/** Options renamed before 1.0, each with what to use instead. */
const RENAMED_OPTIONS: Record<string, string> = { flow: 'control' };
const WORKER_OPTION_NAMES = [
  'enabled',
  'concurrency',
  'queues',
  'pollIntervalMs',
  'shutdownTimeoutMs',
  'heartbeatIntervalMs',
  'prefetch',
  'claimBatchSize',
  'completionBatchSize',
  'metadata',
];

function validateModuleOptions(options: StampededModuleOptions): StampededModuleOptions {
  const where = 'StampededModule.forRoot()';
  const renamed = Object.keys(options ?? {}).find((k) => k in RENAMED_OPTIONS);
  if (renamed) throw new StampededConfigError(RENAMED_OPTION(where, renamed, RENAMED_OPTIONS[renamed]));
  const unknown = Object.keys(options ?? {}).filter((k) => !OPTION_NAMES.includes(k));
  if (unknown.length) throw new StampededConfigError(UNKNOWN_OPTIONS(where, unknown, OPTION_NAMES));
  const badWorker = Object.keys(options.worker ?? {}).filter((k) => !WORKER_OPTION_NAMES.includes(k));
  if (badWorker.length) throw new StampededConfigError(UNKNOWN_OPTIONS(`${where}: worker`, badWorker, WORKER_OPTION_NAMES));
  for (const key of ['concurrency', 'pollIntervalMs', 'heartbeatIntervalMs', 'claimBatchSize', 'completionBatchSize'] as const) {
    const value = options.worker?.[key];
    if (value !== undefined && (!Number.isInteger(value) || value < 1)) {
      throw new StampededConfigError(NOT_A_WHOLE_NUMBER(where, `worker.${key}`, value, 1));
    }
  }
  for (const key of ['prefetch', 'shutdownTimeoutMs'] as const) {
    const value = options.worker?.[key];
    if (key === 'prefetch' && value === 'auto') continue;
    if (value !== undefined && (!Number.isInteger(value) || (value as number) < 0)) {
      throw new StampededConfigError(NOT_A_WHOLE_NUMBER(where, `worker.${key}`, value, 0, key === 'prefetch' ? "'auto'" : undefined));
    }
  }
  if (options.name !== undefined && (typeof options.name !== 'string' || !/^[A-Za-z0-9_-]{1,63}$/.test(options.name))) {
    throw new StampededConfigError(INVALID_INSTANCE_NAME(where, options.name));
  }
  if (options.events !== undefined && options.events !== 'fleet' && options.events !== 'local') {
    throw new StampededConfigError(INVALID_EVENTS_OPTION(where, options.events));
  }
  validatePoolerOptions(where, options);
  const read = options.readConnection as unknown;
  if (read !== undefined && !(typeof read === 'string' ? read !== '' : typeof read === 'object' && read !== null && !Array.isArray(read))) {
    throw new StampededConfigError(INVALID_READ_CONNECTION(where, read));
  }
  if (options.migrations !== undefined && options.migrations !== 'auto' && options.migrations !== 'none') {
    throw new StampededConfigError(INVALID_MIGRATIONS_OPTION(where, options.migrations));
  }
  if (options.schema !== undefined && (typeof options.schema !== 'string' || !options.schema || options.schema.length > 63)) {
    throw new StampededConfigError(INVALID_SCHEMA_OPTION(where, options.schema));
  }
  resolveMaintenanceConfig(options.maintenance, options.worker?.heartbeatIntervalMs);
  resolveSchedulesConfig(options.schedules);
  resolveControlConfig(options.control);
  resolveTracingConfig(options.tracing);
  cipherOf(options);
  if (options.clock !== undefined && typeof options.clock?.now !== 'function') {
    throw new StampededConfigError(INVALID_CLOCK_OPTION(where, options.clock));
  }
  return options;
}

function validatePoolerOptions(where: string, options: StampededModuleOptions): void {
  const pooler = options.pooler as unknown;
  if (pooler !== undefined && pooler !== 'transaction') {
    const p = pooler as Record<string, unknown> | null;
    const valid =
      typeof p === 'object' &&
      p !== null &&
      p.mode === 'transaction' &&
      Object.keys(p).every((k) => k === 'mode' || k === 'preparedStatements') &&
      (p.preparedStatements === undefined || typeof p.preparedStatements === 'boolean');
    if (!valid) throw new StampededConfigError(INVALID_POOLER_OPTION(where, pooler));
  }
  if (options.listenConnection !== undefined && pooler === undefined) throw new StampededConfigError(LISTEN_CONNECTION_WITHOUT_POOLER(where));
  if (pooler !== undefined && options.events === 'fleet' && options.listenConnection === undefined) {
    throw new StampededConfigError(FLEET_EVENTS_NEED_LISTEN(where));
  }
}

/** The options forRoot()/forRootAsync() were given, when they were used. */
const STAMPEDED_EXPLICIT_OPTIONS = Symbol('STAMPEDED_EXPLICIT_OPTIONS');

/**
 * The one core of an app: every service, instantiated once however many
 * modules import StampededModule, plain or through forRoot(). A static class
 * is what makes it one: Nest keys dynamic modules by their metadata, so a
 * plain import beside forRoot() would otherwise build a second core, with a
 * second worker, on default options.
 */
@Global()
@Module({
  imports: [DiscoveryModule, StampededInstancesModule],
  providers: [
    {
      provide: STAMPEDED_OPTIONS,
      inject: [{ token: STAMPEDED_EXPLICIT_OPTIONS, optional: true }],
      useFactory: (explicit?: StampededModuleOptions) => explicit ?? {},
    },
    ...instanceProviders(),
    defaultInstanceAlias,
  ],
  exports: [...CORE_EXPORTS, StampededDatabase, ReadDatabase, defaultInstanceAlias],
})
export class StampededCoreModule {}

/**
 * The queue. `imports: [StampededModule]` alone works with defaults (the
 * app's default TypeORM DataSource, schema public); `forRoot(options)` and
 * `forRootAsync(...)` configure it; `registerQueue(...)` adds per-queue
 * settings and a queue handle for @InjectQueue(name). Global: import it once.
 * `forRoot({ name })` declares another instance, on another database, beside
 * the default one (docs/module.md, "Several databases").
 */
@Module({ imports: [StampededCoreModule], exports: [StampededCoreModule] })
export class StampededModule {
  static forRoot(options: StampededModuleOptions = {}): DynamicModule {
    validateModuleOptions(options);
    const read = typeof options.readConnection === 'string' ? options.readConnection : undefined;
    const dataSources = [namedDataSourceProvider(options.dataSource), ...(read ? [readDataSourceProvider(read)] : [])];
    if (instanceNameOf(options.name) !== DEFAULT_INSTANCE) {
      return namedInstanceModule(options.name!, [{ provide: STAMPEDED_OPTIONS, useValue: options }, ...dataSources]);
    }
    const providers = [{ provide: STAMPEDED_EXPLICIT_OPTIONS, useValue: options }, ...dataSources];
    return { global: true, module: StampededModule, providers, exports: providers.map((p) => p.provide) };
  }

  /**
   * `dataSource` names the app's TypeORM DataSource here, as the factory runs
   * too late to choose it; so does `readConnection` name a replica's (the
   * factory may return the replica's DataSource itself, or its connection),
   * and `name` the instance, whose tokens are made before the factory runs.
   */
  static forRootAsync(options: StampededModuleAsyncOptions & { dataSource?: string; readConnection?: string; name?: string }): DynamicModule {
    const dataSources = [namedDataSourceProvider(options.dataSource), ...(options.readConnection ? [readDataSourceProvider(options.readConnection)] : [])];
    if (instanceNameOf(options.name) !== DEFAULT_INSTANCE) {
      validateModuleOptions({ name: options.name });
      const named = asyncOptionsProviders(options, STAMPEDED_OPTIONS, options.name);
      return namedInstanceModule(options.name!, [...named, ...dataSources], options.imports ?? []);
    }
    const providers = [...asyncOptionsProviders(options), ...dataSources];
    return {
      global: true,
      module: StampededModule,
      imports: options.imports ?? [],
      providers,
      exports: [STAMPEDED_EXPLICIT_OPTIONS, STAMPEDED_DATA_SOURCE, ...(options.readConnection ? [STAMPEDED_READ_DATA_SOURCE] : [])],
    };
  }

  /** Per-queue settings: a partition of its own, unlogged, concurrency, job defaults; and a handle to inject. */
  static registerQueue(...queues: RegisterQueueOptions[]): DynamicModule {
    const providers: Provider[] = queues.map((queue) => ({
      provide: getQueueToken(queue.name),
      inject: [{ token: instanceHandleToken(queue.instance), optional: true }, StampededInstances],
      useFactory: (instance: StampededInstance | undefined, instances: StampededInstances) => {
        if (!instance) {
          const what = `StampededModule.registerQueue(${JSON.stringify(queue.name)})`;
          throw new StampededConfigError(UNKNOWN_INSTANCE(what, instanceNameOf(queue.instance), instances.names()));
        }
        instance.queues.register(queue);
        return new Queue(queue.name, instance.queue);
      },
    }));
    return { module: StampededQueueModule, providers, exports: providers };
  }
}

/** The DataSource forRoot() names, resolved by DI so that it is ready before the core's pool is built. */
function namedDataSourceProvider(name: string | undefined) {
  return {
    provide: STAMPEDED_DATA_SOURCE,
    inject: [dataSourceDependency(name)],
    useFactory: (dataSource?: DataSource) => dataSource ?? null,
  };
}

/** The replica's DataSource that readConnection names; the core's pool waits for it, so that a missing one fails the start before any pool opens. */
function readDataSourceProvider(name: string) {
  return {
    provide: STAMPEDED_READ_DATA_SOURCE,
    inject: [dataSourceDependency(name)],
    useFactory: (dataSource?: DataSource) => {
      if (!dataSource) throw new StampededConfigError(NO_DATA_SOURCE(name));
      return dataSource;
    },
  };
}

/** Holds the queue handles of registerQueue(); the core lives in the global StampededModule. */
@Module({})
export class StampededQueueModule {}

/** The options forRootAsync() makes, under `token`; a named instance's carry its name whatever the factory returns. */
function asyncOptionsProviders(options: StampededModuleAsyncOptions, token: symbol = STAMPEDED_EXPLICIT_OPTIONS, name?: string): Provider[] {
  const named = (made: StampededModuleOptions) => validateModuleOptions(name === undefined ? made : { ...made, name });
  if (options.useFactory) {
    return [
      {
        provide: token,
        inject: options.inject ?? [],
        useFactory: async (...args: unknown[]) => named(await options.useFactory!(...args)),
      },
    ];
  }
  const factoryClass = options.useClass ?? options.useExisting;
  if (!factoryClass) throw new StampededConfigError(ASYNC_OPTIONS_SOURCE_REQUIRED());
  return [
    ...(options.useClass ? [{ provide: options.useClass, useClass: options.useClass }] : []),
    {
      provide: token,
      inject: [factoryClass],
      useFactory: async (factory: StampededOptionsFactory) => named(await factory.createStampededOptions()),
    },
  ];
}
