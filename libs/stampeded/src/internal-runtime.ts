// @stampeded/nestjs/internal-runtime: the Nest-bound part of the internal
// entry point, kept apart so that importing @stampeded/nestjs/internal loads
// no Nest module. For @stampeded/testing; not for applications.
export { WorkerOrchestrator } from './worker/worker.orchestrator.js';
export type { DrainOptions, DrainResult } from './worker/worker.orchestrator.js';
export { NotificationListener } from './database/notification-listener.js';
