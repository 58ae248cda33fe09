// @stampeded/nestjs/internal: what the sibling packages (@stampeded/dashboard,
// its CLI, @stampeded/testing) share with the core. Not for applications: it
// changes with the core, without notice in the CHANGELOG. It loads no Nest
// module, so that the CLI starts in the time that pg alone takes to load.
export { sql, qualify, quoteIdent } from './sql/statement.js';
export type { Statement } from './sql/statement.js';
export { StampededDatabase } from './database/stampeded-database.js';
export { ReadDatabase } from './database/read-database.js';
export type { ReplicaStatus } from './database/read-database.js';
export { LeaderLease } from './maintenance/leader-lease.js';
export { JOB_STATES, FINISHED_STATES, WAITING_STATES } from './interfaces/job.interface.js';
export type { JobState } from './interfaces/job.interface.js';
export { toJob, toJobLogs } from './queue/job.mapper.js';
export type { JobLogRow } from './queue/job.mapper.js';
export { JOB_LOG_LINES } from './sql/job-logs.sql.js';
export { taskNameOf } from './decorators/task-metadata.js';
export { DeadLetterRedriver } from './queue/dead-letter-redriver.js';
export type { RedriveDatabase } from './queue/dead-letter-redriver.js';
export { MIGRATION_FILES, LATEST_VERSION } from './sql/migrations/migration-files.js';
export type { MigrationFile } from './sql/migrations/migration-files.js';
export { applyMigrations } from './sql/migrations/migrations.js';
export type { SqlRunner } from './sql/migrations/migrations.js';
export { withBlocks } from './sql/migrations/function-blocks.js';
export { REDRIVE_PREVIEW, REDRIVE_BATCH } from './sql/dead-letters.sql.js';
export { COMPLETE_MANY, COMPLETE_MANY_NOTIFY, ORDERING_TO_BACK } from './sql/jobs.sql.js';
export { CLAIM_BATCH } from './sql/claim.sql.js';
export { eventsChannel } from './sql/notifications.sql.js';
export { decideVerdict } from './control/queue-verdict.js';
export type { Decision, QueueFacts, Verdict } from './control/queue-verdict.js';
export { BREAKER_RESET, LIST_BREAKERS, LIST_POLICIES, PAUSE_QUEUE, RESUME_QUEUE, UPSERT_POLICY } from './sql/control.sql.js';
export { toBreaker, toPolicy } from './control/control.mapper.js';
export { validateQueuePolicy } from './control/control.config.js';
export { SET_SCHEDULE_PAUSED, TRIGGER_SCHEDULE } from './sql/schedules.sql.js';
export { StampededConfigError } from './errors/stampeded.errors.js';
export { durationMs } from './maintenance/maintenance.config.js';
export { REQUIRED_SERVER_VERSION_NUM, DEFAULT_INSTANCE, instanceHandleToken } from './stampeded.constants.js';
export type { StampededInstance } from './instances/stampeded-instances.js';
export { CANCEL_WORKFLOW, GET_WORKFLOW, LIST_WORKFLOWS, WORKFLOW_JOBS } from './sql/workflows.sql.js';
export { toWorkflow, toWorkflowSummary } from './workflows/workflow.mapper.js';
export { VACUUM_HEALTH } from './sql/maintenance.sql.js';
export { VacuumWatch, VACUUM_WARNINGS } from './maintenance/vacuum-watch.js';
export type { VacuumStanding } from './maintenance/vacuum-watch.js';
export { vacuumReading } from './maintenance/health-reporter.js';
export { JobCipher } from './encryption/job-cipher.js';
export { JobEncryption } from './encryption/job-encryption.js';
export { EncryptionRotator, ROTATE_BATCH_SIZE } from './encryption/encryption-rotator.js';
export { envelopeOf, envelopeOfText } from './encryption/envelope.js';
export { sealedKeyIdSql } from './sql/encryption.sql.js';
