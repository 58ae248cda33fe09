import type { CancelWorkflowResult, Workflow, WorkflowSummary } from '@stampeded/nestjs';
import type { InspectorDatabase } from './inspector-database.js';
import { InstallInspector, type InstallHealth } from './install-inspector.js';
import { JobActions, type ActionResult, type BulkFilters, type BulkResult } from './job-actions.js';
import { JobInspector, type JobListOptions, type JobPage } from './job-inspector.js';
import { attemptTimeline, type AttemptTimeline } from './attempt-timeline.js';
import { RelatedJobsInspector, type RelatedJobs } from './related-jobs.js';
import { MaintenanceActions, type PruneOptions, type RedriveOptions, type RedriveResult } from './maintenance-actions.js';
import { QueueInspector, type QueueSummary, type ThroughputBucket } from './queue-inspector.js';
import { ScheduleInspector } from './schedule-inspector.js';
import { WorkflowInspector } from './workflow-inspector.js';

/**
 * The operator's view of one Stampeded install, and the few actions on it.
 * The dashboard and the CLI both use it, so both answer the same way. Every
 * statement reads through an index or the trigger-maintained counters.
 * Each concern is a class of its own beside this one; this is the one
 * object the dashboard's controllers and the CLI's commands hold.
 */
export class StampededInspector {
  private readonly queueInspector: QueueInspector;
  private readonly jobInspector: JobInspector;
  private readonly relatedJobs: RelatedJobsInspector;
  private readonly jobActions: JobActions;
  private readonly scheduleInspector: ScheduleInspector;
  private readonly workflowInspector: WorkflowInspector;
  private readonly installInspector: InstallInspector;
  private readonly maintenanceActions: MaintenanceActions;

  constructor(db: InspectorDatabase) {
    this.queueInspector = new QueueInspector(db);
    this.jobInspector = new JobInspector(db);
    this.relatedJobs = new RelatedJobsInspector(db);
    this.jobActions = new JobActions(db);
    this.scheduleInspector = new ScheduleInspector(db);
    this.workflowInspector = new WorkflowInspector(db);
    this.installInspector = new InstallInspector(db);
    this.maintenanceActions = new MaintenanceActions(db);
  }

  // Queues: queue-inspector.ts.

  queues(): Promise<QueueSummary[]> {
    return this.queueInspector.queues();
  }

  /** Jobs finished per minute over the last `minutes`, oldest first, every minute present. */
  throughput(options: { minutes?: number } = {}): Promise<ThroughputBucket[]> {
    return this.queueInspector.throughput(options);
  }

  /** An operator's pause, for the whole fleet until resumed, as QueueControlService.pause() writes it. */
  pauseQueue(queue: string, by: string, why?: string): Promise<Record<string, unknown>> {
    return this.queueInspector.pauseQueue(queue, by, why);
  }

  resumeQueue(queue: string): Promise<Record<string, unknown>> {
    return this.queueInspector.resumeQueue(queue);
  }

  // Jobs: job-inspector.ts, and the actions on them in job-actions.ts.

  jobs(filters: JobListOptions = {}): Promise<JobPage> {
    return this.jobInspector.jobs(filters);
  }

  job(id: string, queue?: string): Promise<Record<string, unknown> | null> {
    return this.jobInspector.job(id, queue);
  }

  /**
   * What happened to a job: its attempts (attempt-timeline.ts) and the jobs
   * one click away from it (related-jobs.ts); null when there is no such job.
   */
  async history(id: string, queue?: string): Promise<{ job: Record<string, unknown>; timeline: AttemptTimeline; related: RelatedJobs } | null> {
    const job = await this.jobInspector.job(id, queue);
    if (!job) return null;
    return { job, ...(await this.jobHistory(job)) };
  }

  /** The attempts and related jobs of a job already read. */
  async jobHistory(job: Record<string, unknown>): Promise<{ timeline: AttemptTimeline; related: RelatedJobs }> {
    return { timeline: attemptTimeline(job), related: await this.relatedJobs.related(job) };
  }

  errors(options: { queue?: string; limit?: number } = {}): Promise<Record<string, unknown>[]> {
    return this.jobInspector.errors(options);
  }

  /** A discarded or cancelled job runs again with a fresh budget; a waiting one runs now. */
  retry(id: string, queue?: string): Promise<ActionResult | null> {
    return this.jobActions.retry(id, queue);
  }

  /** Fenced: once this returns no worker can record an outcome for the job. */
  cancel(id: string, queue?: string): Promise<ActionResult | null> {
    return this.jobActions.cancel(id, queue);
  }

  /** A waiting job is finished as discarded without running again; another is left as it is, and says its state. */
  discard(id: string, queue?: string, by = 'an operator'): Promise<ActionResult | null> {
    return this.jobActions.discard(id, queue, by);
  }

  /** Retries, cancels or discards every job matching the filters that the action applies to, in batches; dryRun counts them. */
  bulk(action: string, filters: BulkFilters, options: { dryRun?: boolean; batchSize?: number; limit?: number; by?: string } = {}): Promise<BulkResult> {
    return this.jobActions.bulk(action, filters, options);
  }

  // Schedules: schedule-inspector.ts.

  schedules(): Promise<Record<string, unknown>[]> {
    return this.scheduleInspector.schedules();
  }

  /** True when the schedule exists. */
  setSchedulePaused(key: string, paused: boolean): Promise<boolean> {
    return this.scheduleInspector.setSchedulePaused(key, paused);
  }

  /** Enqueues a schedule's job once, now, as SchedulesService.trigger() does; null when there is no such schedule. */
  triggerSchedule(key: string): Promise<{ id: string; queue: string } | null> {
    return this.scheduleInspector.triggerSchedule(key);
  }

  // Workflows: workflow-inspector.ts.

  /** Workflows and batches, newest first, with their jobs counted by state. */
  workflows(options: { limit?: number | string; name?: string } = {}): Promise<WorkflowSummary[]> {
    return this.workflowInspector.workflows(options);
  }

  /** One workflow with each job's state and what it waits for, or null. */
  workflow(id: string): Promise<Workflow | null> {
    return this.workflowInspector.workflow(id);
  }

  /** Cancels every unfinished job of a workflow; null when there is no such workflow. */
  cancelWorkflow(id: string, reason?: string): Promise<CancelWorkflowResult | null> {
    return this.workflowInspector.cancelWorkflow(id, reason);
  }

  // The install: install-inspector.ts; maintenance by hand: maintenance-actions.ts.

  health(): Promise<InstallHealth> {
    return this.installInspector.health();
  }

  workers(): Promise<{ workers: Record<string, unknown>[]; running: Record<string, unknown>[] }> {
    return this.installInspector.workers();
  }

  /** Puts a dead-letter queue's copies back on their source queues, as QueueService.redrive() does. */
  redrive(queue: string, options: RedriveOptions = {}): Promise<RedriveResult> {
    return this.maintenanceActions.redrive(queue, options);
  }

  /** Deletes finished jobs past their retention, batch by batch until a short batch comes back. */
  prune(options: PruneOptions = {}): Promise<{ jobs: number; occurrences: number }> {
    return this.maintenanceActions.prune(options);
  }
}
