import { Inject } from '@nestjs/common';
import { QueueService } from '../queue/queue.service.js';
import { JobEvents } from '../events/job-events.js';
import { SchedulesService } from '../scheduler/schedules.service.js';
import { MaintenanceService } from '../maintenance/maintenance.service.js';
import { QueueControlService } from '../control/queue-control.service.js';
import { DEFAULT_INSTANCE, instanceNameOf } from '../stampeded.constants.js';

export { instanceHandleToken } from '../stampeded.constants.js';

/** A public service of an instance: the class for the default instance (today's token), a string of the instance's name otherwise. */
type InstanceService = typeof QueueService | typeof JobEvents | typeof SchedulesService | typeof MaintenanceService | typeof QueueControlService;

function serviceToken<T extends InstanceService>(service: T, key: string, instance?: string): T | string {
  const name = instanceNameOf(instance);
  return name === DEFAULT_INSTANCE ? service : `Stampeded:${name}:${key}`;
}

/** The injection token of an instance's QueueService, as @nestjs/typeorm's getDataSourceToken(): overrideProvider(getQueueServiceToken('billing')). */
export const getQueueServiceToken = (instance?: string) => serviceToken(QueueService, 'QueueService', instance);
/** The injection token of an instance's JobEvents. */
export const getJobEventsToken = (instance?: string) => serviceToken(JobEvents, 'JobEvents', instance);
/** The injection token of an instance's SchedulesService. */
export const getSchedulesServiceToken = (instance?: string) => serviceToken(SchedulesService, 'SchedulesService', instance);
/** The injection token of an instance's MaintenanceService. */
export const getMaintenanceServiceToken = (instance?: string) => serviceToken(MaintenanceService, 'MaintenanceService', instance);
/** The injection token of an instance's QueueControlService. */
export const getQueueControlServiceToken = (instance?: string) => serviceToken(QueueControlService, 'QueueControlService', instance);

/** Injects the QueueService of the instance named (the default instance's without a name). */
export const InjectQueueService = (instance?: string) => Inject(getQueueServiceToken(instance));
/** Injects the JobEvents of the instance named. */
export const InjectJobEvents = (instance?: string) => Inject(getJobEventsToken(instance));
/** Injects the SchedulesService of the instance named. */
export const InjectSchedulesService = (instance?: string) => Inject(getSchedulesServiceToken(instance));
/** Injects the MaintenanceService of the instance named. */
export const InjectMaintenanceService = (instance?: string) => Inject(getMaintenanceServiceToken(instance));
/** Injects the QueueControlService of the instance named. */
export const InjectQueueControlService = (instance?: string) => Inject(getQueueControlServiceToken(instance));

/** The public services each instance exports under its name, and the token function of each. */
export const INSTANCE_SERVICES: readonly [InstanceService, (instance?: string) => unknown][] = [
  [QueueService, getQueueServiceToken],
  [JobEvents, getJobEventsToken],
  [SchedulesService, getSchedulesServiceToken],
  [MaintenanceService, getMaintenanceServiceToken],
  [QueueControlService, getQueueControlServiceToken],
];
