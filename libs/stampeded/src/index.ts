export { StampededModule, StampededQueueModule } from './stampeded.module.js';
export { QueueService } from './queue/queue.service.js';
export type { ArgsOf, CancelResult, EnqueueManyItem, RetryResult } from './queue/queue.service.js';
export { Queue } from './queue/queue.js';
export { DeadLetterRedriver } from './queue/dead-letter-redriver.js';
export type { RedriveDatabase } from './queue/dead-letter-redriver.js';
export type * from './interfaces/redrive.interface.js';
export { Task } from './decorators/task.decorator.js';
export { OnJobEvent } from './decorators/on-job-event.decorator.js';
export type { OnJobEventFilter } from './decorators/on-job-event.decorator.js';
export { InjectQueue, getQueueToken } from './decorators/inject-queue.decorator.js';
export { JobEvents } from './events/job-events.js';
export { WorkerOrchestrator } from './worker/worker.orchestrator.js';
export { MaintenanceService } from './maintenance/maintenance.service.js';
export { MAINTENANCE_DEFAULTS } from './maintenance/maintenance.config.js';
export { FlowService } from './flow/flow.service.js';
export { FLOW_DEFAULTS } from './flow/flow.config.js';
export { decideVerdict, QUEUE_POLICY_TREE } from './flow/queue-policy.tree.js';
export type { BehaviourNode, Decision, QueueFacts, Verdict } from './flow/queue-policy.tree.js';
export type * from './interfaces/flow.interface.js';
export type * from './interfaces/tracing.interface.js';
export { SchedulesService } from './scheduler/schedules.service.js';
export type { ScheduleOccurrence } from './scheduler/schedules.service.js';
export { SCHEDULES_DEFAULTS } from './scheduler/schedules.config.js';
export { nextOccurrence } from './scheduler/schedule-rule.js';
export type { ScheduleRule } from './scheduler/schedule-rule.js';
export type * from './interfaces/maintenance.interface.js';
export type * from './interfaces/schedule.interface.js';
export type * from './interfaces/clock.interface.js';
export type { DrainOptions, DrainResult } from './worker/worker.orchestrator.js';
export { JobAbortedError } from './worker/worker.js';
export { retryDelayMs } from './worker/backoff.js';
export { WorkerExitedError } from './isolation/process-task.runner.js';
export { StampededDatabase } from './database/stampeded-database.js';
export { migrate } from './sql/migrations/migrate.js';
export type { MigrateOptions, MigrateTarget } from './sql/migrations/migrate.js';
export { stampededMigrations } from './sql/migrations/typeorm-migrations.js';
export { MIGRATION_FILES, LATEST_VERSION } from './sql/migrations/migrations.js';
export type { MigrationFile } from './sql/migrations/migrations.js';
export {
  StampededConfigError,
  InvalidJobError,
  UnrecoverableError,
  RetryAfterError,
  CheckpointError,
  BreakerOpenError,
} from './errors/stampeded.errors.js';
export { DEFAULT_QUEUE, RUNTIME_META_KEY, LIMITS, SCHEMA_DEFAULTS } from './stampeded.constants.js';
export type * from './interfaces/stampeded-options.interface.js';
export type * from './interfaces/job-options.interface.js';
export type * from './interfaces/job.interface.js';
export type * from './interfaces/task.interface.js';
export type * from './interfaces/job-event.interface.js';
export { JOB_STATES } from './interfaces/job.interface.js';
export { toJob } from './queue/job.mapper.js';
