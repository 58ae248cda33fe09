import { Module, type DynamicModule, type Provider, type Type } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { STAMPEDED_OPTIONS, instanceNameOf } from '../stampeded.constants.js';
import { createDatabaseProvider, createReadDatabaseProvider } from '../database/database.provider.js';
import { ReadDatabase } from '../database/read-database.js';
import { createJobColumnDefaultsProvider } from '../queue/job-column-defaults.js';
import { createTracerProvider } from '../tracing/tracing.provider.js';
import { StampededDatabase } from '../database/stampeded-database.js';
import { NotificationListener } from '../database/notification-listener.js';
import { TaskRegistry } from '../explorer/task.registry.js';
import { TaskExplorer } from '../explorer/task.explorer.js';
import { JobEvents } from '../events/job-events.js';
import { QueueRegistry } from '../queue/queue.registry.js';
import { QueueService } from '../queue/queue.service.js';
import { WorkerOrchestrator } from '../worker/worker.orchestrator.js';
import { MaintenanceService } from '../maintenance/maintenance.service.js';
import { SchedulesService } from '../scheduler/schedules.service.js';
import { SchedulerOrchestrator } from '../scheduler/scheduler.orchestrator.js';
import { QueueControlService } from '../control/queue-control.service.js';
import { StampededInstances, StampededInstancesModule, type StampededInstance } from './stampeded-instances.js';
import { INSTANCE_SERVICES, instanceHandleToken } from './instance.tokens.js';
import { scopeProviders } from './instance-scope.js';
import { JOB_COLUMN_DEFAULTS } from '../stampeded.constants.js';
import { STAMPEDED_DATA_SOURCE, STAMPEDED_READ_DATA_SOURCE } from '../database/database.provider.js';
import { JOB_TRACER } from '../tracing/tracing.provider.js';
import type { StampededModuleOptions } from '../interfaces/stampeded-options.interface.js';

/** Injection token of the instance's own handle, inside its module: `instance`, so that a named one's is instanceHandleToken(name). */
const STAMPEDED_INSTANCE = Symbol('instance');

/** The services an instance's handle holds, by the handle's field: the one list its provider injects and assigns. */
const HANDLE_PARTS = {
  database: StampededDatabase,
  reads: ReadDatabase,
  queue: QueueService,
  events: JobEvents,
  worker: WorkerOrchestrator,
  maintenance: MaintenanceService,
  schedules: SchedulesService,
  control: QueueControlService,
  tasks: TaskRegistry,
  queues: QueueRegistry,
} as const satisfies { [K in Exclude<keyof StampededInstance, 'name' | 'options'>]: Type<StampededInstance[K]> };

/** The instance's handle, added to the app's StampededInstances as the module is built: a second instance of one name stops it there. */
const instanceHandleProvider: Provider = {
  provide: STAMPEDED_INSTANCE,
  inject: [STAMPEDED_OPTIONS, StampededInstances, ...Object.values(HANDLE_PARTS)],
  useFactory: (options: StampededModuleOptions, instances: StampededInstances, ...parts: unknown[]): StampededInstance => {
    const services = Object.fromEntries(Object.keys(HANDLE_PARTS).map((field, i) => [field, parts[i]]));
    return instances.add({ name: instanceNameOf(options.name), options, ...services } as StampededInstance);
  },
};

/**
 * Every provider of one instance, given its options (STAMPEDED_OPTIONS and
 * STAMPEDED_DATA_SOURCE, which the caller provides). The default instance's
 * module holds them as they are; each named one under its name's tokens
 * (scopeProviders).
 */
export function instanceProviders(): Provider[] {
  return [
    createDatabaseProvider(),
    createReadDatabaseProvider(),
    createJobColumnDefaultsProvider(),
    createTracerProvider(),
    TaskRegistry,
    TaskExplorer,
    JobEvents,
    QueueRegistry,
    QueueService,
    WorkerOrchestrator,
    MaintenanceService,
    SchedulesService,
    SchedulerOrchestrator,
    QueueControlService,
    NotificationListener,
    instanceHandleProvider,
  ];
}

/** The alias of the default instance's handle: its services keep their classes as tokens. */
export const defaultInstanceAlias: Provider = { provide: instanceHandleToken(), useExisting: STAMPEDED_INSTANCE };

/** Holds one named instance (forRoot({ name })). */
@Module({})
export class StampededInstanceModule {}

/** The tokens a named instance holds under its name: its classes, its options, and what is made from them. */
const SCOPED_TOKENS: ReadonlySet<unknown> = new Set<unknown>([
  ...instanceProviders().filter((p): p is Type<unknown> => typeof p === 'function'),
  StampededDatabase,
  ReadDatabase,
  STAMPEDED_OPTIONS,
  STAMPEDED_DATA_SOURCE,
  STAMPEDED_READ_DATA_SOURCE,
  JOB_COLUMN_DEFAULTS,
  JOB_TRACER,
  STAMPEDED_INSTANCE,
]);

/**
 * A named instance: its own providers, under its name's tokens
 * (getQueueServiceToken(name) and the like, instanceHandleToken(name)), and
 * global, so that @InjectQueueService(name) works in every module.
 */
export function namedInstanceModule(name: string, optionProviders: Provider[], imports: DynamicModule['imports'] = []): DynamicModule {
  const providers = scopeProviders(name, [...optionProviders, ...instanceProviders()], SCOPED_TOKENS);
  const exported = [...INSTANCE_SERVICES.map(([, token]) => token(name) as string), instanceHandleToken(name)];
  return {
    global: true,
    module: StampededInstanceModule,
    imports: [DiscoveryModule, StampededInstancesModule, ...imports],
    providers,
    exports: exported,
  };
}
