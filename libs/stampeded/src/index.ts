// @stampeded/nestjs: what an application uses. The sibling packages share
// more through @stampeded/nestjs/internal, which is not part of this surface.
export { StampededModule, StampededQueueModule } from './stampeded.module.js';
export { QueueService } from './queue/queue.service.js';
export type { CancelResult, EnqueueManyItem, EnqueueManyItemOf, FindJobOptions, GetJobOptions, RetryResult, WaitForOptions } from './queue/queue.service.js';
export { Queue } from './queue/queue.js';
export { Task } from './decorators/task.decorator.js';
export type { TaskDecorator, TaskClassFor, ChunkTaskDecorator, ChunkTaskClassFor } from './decorators/task.decorator.js';
export { OnJobEvent } from './decorators/on-job-event.decorator.js';
export type { OnJobEventFilter } from './decorators/on-job-event.decorator.js';
export { InjectQueue, getQueueToken } from './decorators/inject-queue.decorator.js';
export {
  getQueueServiceToken,
  getJobEventsToken,
  getSchedulesServiceToken,
  getMaintenanceServiceToken,
  getQueueControlServiceToken,
  InjectQueueService,
  InjectJobEvents,
  InjectSchedulesService,
  InjectMaintenanceService,
  InjectQueueControlService,
} from './instances/instance.tokens.js';
export { JobEvents } from './events/job-events.js';
export { MaintenanceService } from './maintenance/maintenance.service.js';
export { QueueControlService } from './control/queue-control.service.js';
export { SchedulesService } from './scheduler/schedules.service.js';
export type { ScheduleOccurrence } from './scheduler/schedules.service.js';
export { DEFAULT_RETRY_POLICY } from './worker/retry-policy.js';
export { WorkerExitedError } from './isolation/process-task.runner.js';
export { migrate } from './sql/migrations/migrate.js';
export { writableHostClient } from './database/writable-host.js';
export type { MigrateOptions, MigrateTarget } from './sql/migrations/migrate.js';
export type { AppliedChanges } from './sql/migrations/migrations.js';
export type { MigrationFile } from './sql/migrations/migration-files.js';
export { stampededMigrations } from './sql/migrations/typeorm-migrations.js';
export {
  StampededConfigError,
  SeedMismatchError,
  InvalidJobError,
  UnrecoverableError,
  RetryAfterError,
  CheckpointError,
  ResultError,
  ProgressError,
  BreakerOpenError,
  JobAbortedError,
  JobWaitError,
  EncryptionError,
} from './errors/stampeded.errors.js';
export { DEFAULT_QUEUE, DEFAULT_INSTANCE } from './stampeded.constants.js';
export { JOB_STATES } from './interfaces/job.interface.js';
export type { Job, JobState, FailureKind, JobErrorEntry, JobProgress, JobLogs, JobLogLine, QueueCounts } from './interfaces/job.interface.js';
export type { JobOptions, EnqueueOptions, EnqueueResult, DedupPeriod, DedupMode, DedupOptions } from './interfaces/job-options.interface.js';
export type {
  TaskOptions,
  JobContext,
  TaskHandler,
  TaskClass,
  StampededTasks,
  StampededTypeOptions,
  RegisteredTaskName,
  UnregisteredTaskName,
  TypedTask,
  ArgsOf,
  ResultOf,
} from './interfaces/task.interface.js';
export type { ChunkOptions, ChunkJob, ChunkContext, ChunkTaskHandler } from './interfaces/chunk.interface.js';
export type { RetryPolicy, RetryDecision, FailedAttempt, RetryableFailureKind } from './interfaces/retry-policy.interface.js';
export type { StandardSchemaV1, StandardSchemaResult, ArgsIssue, ArgsValidateHook, ArgsValidateAnswer } from './interfaces/validation.interface.js';
export type { JobEvent, JobEventType, LocalJobEvent, FleetJobEvent } from './interfaces/job-event.interface.js';
export type {
  StampededModuleOptions,
  StampededModuleAsyncOptions,
  StampededOptionsFactory,
  RegisterQueueOptions,
  WorkerOptions,
  ConnectionOptions,
} from './interfaces/stampeded-options.interface.js';
export type { QueuePolicy, QueuePolicyRow, Breaker, BreakerState, BreakerOptions, FairnessOptions, ControlOptions } from './interfaces/control.interface.js';
export type {
  Duration,
  MaintenanceOptions,
  MaintenanceHealth,
  MaintenanceEvent,
  MaintenanceTaskName,
  VacuumHealth,
  IndexDensity,
  PartitionHealth,
} from './interfaces/maintenance.interface.js';
export type { VacuumStanding } from './maintenance/vacuum-watch.js';
export type {
  Schedule,
  ScheduleDefinition,
  ScheduleFiring,
  SchedulesOptions,
  TaskScheduleOptions,
  DstPolicy,
  MissedPolicy,
} from './interfaces/schedule.interface.js';
export type { RedriveOptions, RedriveResult, RedriveSource } from './interfaces/redrive.interface.js';
export type {
  WorkflowDefinition,
  WorkflowJob,
  WorkflowDependency,
  FlowNode,
  BatchDefinition,
  BatchCounts,
  EnqueueWorkflowOptions,
  EnqueueWorkflowResult,
  Workflow,
  WorkflowJobState,
  WorkflowSummary,
  WorkflowDependencyJob,
  CancelWorkflowResult,
} from './interfaces/workflow.interface.js';
export type { StampededClock } from './interfaces/clock.interface.js';
export type { EncryptionOptions, RotateEncryptionOptions, RotateEncryptionResult } from './interfaces/encryption.interface.js';
export type { TracingOptions, TracerProviderLike } from './interfaces/tracing.interface.js';
