import type { Breaker, CancelWorkflowResult, QueuePolicyRow, Workflow, WorkflowSummary } from '@stampeded/nestjs';
import type { ReplicaStatus } from '@stampeded/nestjs/internal';
import type { InspectorDatabase, InspectorReads } from './inspector-database.js';
import { InstallInspector, type InstallHealth } from './install-inspector.js';
import { JobActions, type ActionResult, type BulkFilters, type BulkResult } from './job-actions.js';
import { JobInspector, type JobListOptions, type JobPage } from './job-inspector.js';
import { attemptTimeline, type AttemptTimeline } from './attempt-timeline.js';
import { RelatedJobsInspector, type RelatedJobs } from './related-jobs.js';
import { MaintenanceActions, type PruneOptions, type RedriveOptions, type RedriveResult } from './maintenance-actions.js';
import { InsightsInspector, type Insights } from './insights-inspector.js';
import { QueueInspector, type QueueSummary, type ThroughputBucket } from './queue-inspector.js';
import { QueuePolicyActions } from './queue-policy.js';
import { ScheduleInspector } from './schedule-inspector.js';
import { WorkflowInspector } from './workflow-inspector.js';

/** Each concern's inspector, all on one database. */
class Inspectors {
  readonly queues: QueueInspector;
  readonly queuePolicy: QueuePolicyActions;
  readonly jobs: JobInspector;
  readonly related: RelatedJobsInspector;
  readonly jobActions: JobActions;
  readonly schedules: ScheduleInspector;
  readonly workflows: WorkflowInspector;
  readonly install: InstallInspector;
  readonly maintenance: MaintenanceActions;
  readonly insights: InsightsInspector;

  constructor(db: InspectorDatabase) {
    this.queues = new QueueInspector(db);
    this.queuePolicy = new QueuePolicyActions(db);
    this.jobs = new JobInspector(db);
    this.related = new RelatedJobsInspector(db);
    this.jobActions = new JobActions(db);
    this.schedules = new ScheduleInspector(db);
    this.workflows = new WorkflowInspector(db);
    this.install = new InstallInspector(db);
    this.maintenance = new MaintenanceActions(db);
    this.insights = new InsightsInspector(db);
  }
}

/**
 * The operator's view of one Stampeded install, and the few actions on it.
 * The dashboard and the CLI both use it, so both answer the same way. Every
 * statement reads through an index or the trigger-maintained counters.
 * Each concern is a class of its own beside this one; this is the one
 * object the dashboard's controllers and the CLI's commands hold.
 *
 * It is also where each operation chooses its database: the lists, counts
 * and charts read `reads` (a replica, when the module's readConnection
 * sets one), while every action, and the install's health (the leader's
 * lock and the tables' vacuum counters are the primary's own), go to `db`.
 */
export class StampededInspector {
  /** The inspectors on `reads`. */
  private readonly reading: Inspectors;
  /** The inspectors on the primary. */
  private readonly acting: Inspectors;

  constructor(
    db: InspectorDatabase,
    private readonly reads?: InspectorReads,
  ) {
    this.acting = new Inspectors(db);
    this.reading = reads ? new Inspectors(reads) : this.acting;
  }

  // The replica: how far behind the reads may be.

  /** How far behind the replica that the lists read is; null when they read the primary by configuration. */
  async replica(): Promise<ReplicaStatus | null> {
    return (await this.reads?.status()) ?? null;
  }

  /** After an action: waits, up to `timeoutMs`, until the replica shows it. */
  async catchUp(timeoutMs: number): Promise<boolean> {
    return (await this.reads?.catchUp(timeoutMs)) ?? true;
  }

  // Queues: queue-inspector.ts.

  queues(): Promise<QueueSummary[]> {
    return this.reading.queues.queues();
  }

  /** Jobs finished per minute over the last `minutes`, oldest first, every minute present. */
  throughput(options: { minutes?: number } = {}): Promise<ThroughputBucket[]> {
    return this.reading.queues.throughput(options);
  }

  /**
   * Outcomes, waits and runs over the last hour, day or week, for a queue, a
   * task or all (insights-inspector.ts), from the maintenance leader's rollup.
   */
  insights(options: { queue?: string; task?: string; range?: string } = {}): Promise<Insights> {
    return this.reading.insights.insights(options);
  }

  /** An operator's pause, for the whole fleet until resumed, as QueueControlService.pause() writes it. */
  pauseQueue(queue: string, by: string, why?: string): Promise<Record<string, unknown>> {
    return this.acting.queues.pauseQueue(queue, by, why);
  }

  resumeQueue(queue: string): Promise<Record<string, unknown>> {
    return this.acting.queues.resumeQueue(queue);
  }

  /** One queue as the queues page shows it (zero counts for a queue with no jobs and no policy yet). */
  async queue(name: string): Promise<QueueSummary> {
    const found = (await this.reading.queues.queues()).find((q) => q.queue === name);
    return found ?? this.reading.queues.emptySummary(name);
  }

  // A queue's policy and the breakers: queue-policy.ts.

  /** Validated by the core's rules before anything is written; `by` is kept in the row with the time. */
  setPolicy(queue: string, input: Record<string, unknown>, by: string): Promise<QueuePolicyRow> {
    return this.acting.queuePolicy.setPolicy(queue, input, by);
  }

  breakers(): Promise<Breaker[]> {
    return this.reading.queuePolicy.breakers();
  }

  /** Closes a destination's breaker for the fleet, its deferred jobs due at once; null when there is none. */
  closeBreaker(destination: string, by: string): Promise<Breaker | null> {
    return this.acting.queuePolicy.closeBreaker(destination, by);
  }

  // Jobs: job-inspector.ts, and the actions on them in job-actions.ts.

  jobs(filters: JobListOptions = {}): Promise<JobPage> {
    return this.reading.jobs.jobs(filters);
  }

  /**
   * A job the replica does not have yet (one enqueued a moment ago, whose
   * link someone followed) is read from the primary: a page that says "no
   * such job" is wrong in a way that a page a little behind is not.
   */
  async job(id: string, queue?: string): Promise<Record<string, unknown> | null> {
    const job = await this.reading.jobs.job(id, queue);
    if (job || this.reading === this.acting) return job;
    return this.acting.jobs.job(id, queue);
  }

  /**
   * What happened to a job: its attempts (attempt-timeline.ts) and the jobs
   * one click away from it (related-jobs.ts); null when there is no such job.
   */
  async history(id: string, queue?: string): Promise<{ job: Record<string, unknown>; timeline: AttemptTimeline; related: RelatedJobs } | null> {
    const job = await this.job(id, queue);
    if (!job) return null;
    return { job, ...(await this.jobHistory(job)) };
  }

  /** The attempts and related jobs of a job already read. */
  async jobHistory(job: Record<string, unknown>): Promise<{ timeline: AttemptTimeline; related: RelatedJobs }> {
    return { timeline: attemptTimeline(job), related: await this.reading.related.related(job) };
  }

  errors(options: { queue?: string; limit?: number } = {}): Promise<Record<string, unknown>[]> {
    return this.reading.jobs.errors(options);
  }

  /** A discarded or cancelled job runs again with a fresh budget; a waiting one runs now. */
  retry(id: string, queue?: string): Promise<ActionResult | null> {
    return this.acting.jobActions.retry(id, queue);
  }

  /** Fenced: once this returns no worker can record an outcome for the job. */
  cancel(id: string, queue?: string): Promise<ActionResult | null> {
    return this.acting.jobActions.cancel(id, queue);
  }

  /** A waiting job is finished as discarded without running again; another is left as it is, and says its state. */
  discard(id: string, queue?: string, by = 'an operator'): Promise<ActionResult | null> {
    return this.acting.jobActions.discard(id, queue, by);
  }

  /** Retries, cancels or discards every job matching the filters that the action applies to, in batches; dryRun counts them. */
  bulk(action: string, filters: BulkFilters, options: { dryRun?: boolean; batchSize?: number; limit?: number; by?: string } = {}): Promise<BulkResult> {
    return this.acting.jobActions.bulk(action, filters, options);
  }

  // Schedules: schedule-inspector.ts.

  schedules(): Promise<Record<string, unknown>[]> {
    return this.reading.schedules.schedules();
  }

  /** True when the schedule exists. */
  setSchedulePaused(key: string, paused: boolean): Promise<boolean> {
    return this.acting.schedules.setSchedulePaused(key, paused);
  }

  /** Enqueues a schedule's job once, now, as SchedulesService.trigger() does; null when there is no such schedule. */
  triggerSchedule(key: string): Promise<{ id: string; queue: string } | null> {
    return this.acting.schedules.triggerSchedule(key);
  }

  // Workflows: workflow-inspector.ts.

  /** Workflows and batches, newest first, with their jobs counted by state. */
  workflows(options: { limit?: number | string; name?: string } = {}): Promise<WorkflowSummary[]> {
    return this.reading.workflows.workflows(options);
  }

  /** One workflow with each job's state and what it waits for, or null. */
  workflow(id: string): Promise<Workflow | null> {
    return this.reading.workflows.workflow(id);
  }

  /** Cancels every unfinished job of a workflow; null when there is no such workflow. */
  cancelWorkflow(id: string, reason?: string): Promise<CancelWorkflowResult | null> {
    return this.acting.workflows.cancelWorkflow(id, reason);
  }

  // The install: install-inspector.ts; maintenance by hand: maintenance-actions.ts.

  health(): Promise<InstallHealth> {
    return this.acting.install.health();
  }

  workers(): Promise<{ workers: Record<string, unknown>[]; running: Record<string, unknown>[] }> {
    return this.reading.install.workers();
  }

  /** Puts a dead-letter queue's copies back on their source queues, as QueueService.redrive() does. */
  redrive(queue: string, options: RedriveOptions = {}): Promise<RedriveResult> {
    return this.acting.maintenance.redrive(queue, options);
  }

  /** Deletes finished jobs past their retention, batch by batch until a short batch comes back. */
  prune(options: PruneOptions = {}): Promise<{ jobs: number; occurrences: number }> {
    return this.acting.maintenance.prune(options);
  }
}
