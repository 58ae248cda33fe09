// @stampeded/nestjs/internal-runtime: the Nest-bound part of the internal
// entry point, kept apart so that importing @stampeded/nestjs/internal loads
// no Nest module. For @stampeded/testing; not for applications.
export { WorkerOrchestrator } from './worker/worker.orchestrator.js';
export type { DrainOptions, DrainResult } from './worker/worker.orchestrator.js';
export { NotificationListener } from './database/notification-listener.js';
// An app's own options and queues, from which @stampeded/testing builds the app's JobEncryption.
export { QueueRegistry } from './queue/queue.registry.js';
export { STAMPEDED_OPTIONS } from './stampeded.constants.js';
export { StampededInstances } from './instances/stampeded-instances.js';
