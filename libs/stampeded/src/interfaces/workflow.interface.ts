import type { EntityManager } from 'typeorm';
import type { EnqueueOptions } from './job-options.interface.js';
import type { JobState } from './job.interface.js';
import type { TaskClass } from './task.interface.js';

/** What a workflow job waits for: another job's name, or that name with how its failure is taken. */
export type WorkflowDependency =
  | string
  | {
      name: string;
      /**
       * Run anyway when that job is discarded or cancelled (its outcome is
       * then in ctx.dependencies()). Default false: the waiting job is
       * cancelled, with the reason in its last_error.
       */
      ignoreFailure?: boolean;
    };

/** One job of a workflow. */
export interface WorkflowJob<Args extends object = Record<string, unknown>> {
  /** Its name in the workflow, unique there: what other jobs' dependsOn and ctx.dependencies() call it. */
  name: string;
  task: string | TaskClass;
  args?: Args;
  /** The jobs of the same workflow it waits for; it runs once all of them completed. */
  dependsOn?: readonly WorkflowDependency[];
  /** Its job options, as enqueue() takes them (no dedup: a workflow's jobs are its own). */
  options?: Omit<EnqueueOptions, 'manager' | 'dedup' | 'orderingKey'>;
}

export interface WorkflowDefinition {
  /** A name for operators (the dashboard, `stampeded workflows list`); need not be unique. */
  name: string;
  jobs: readonly WorkflowJob[];
}

/** A BullMQ-style flow: a job that runs after its children, each of which can have children of its own. */
export interface FlowNode<Args extends object = Record<string, unknown>> {
  /** Its name in the flow; default: its position, as "0", "0.1", ... */
  name?: string;
  task: string | TaskClass;
  args?: Args;
  options?: Omit<EnqueueOptions, 'manager' | 'dedup' | 'orderingKey'>;
  /** Run this job even when a child is discarded or cancelled. Default false. */
  ignoreChildFailure?: boolean;
  children?: readonly FlowNode[];
}

export interface BatchDefinition {
  name: string;
  jobs: readonly Omit<WorkflowJob, 'dependsOn'>[];
  /**
   * Runs once, when every job of the batch has finished, whatever their
   * outcome; ctx.batch() gives it the counts.
   */
  callback: Omit<WorkflowJob, 'dependsOn' | 'name'> & { name?: string };
}

export interface EnqueueWorkflowOptions {
  /** Enqueue inside this transaction: a rollback leaves no job of it. */
  manager?: EntityManager;
}

export interface EnqueueWorkflowResult {
  /** The workflow's id: getWorkflow(), cancelWorkflow(), `stampeded workflows show`. */
  id: string;
  /** Each job's id, by its name. */
  jobs: Record<string, string>;
}

/** A workflow job as a running job sees it through ctx.dependencies(). */
export interface WorkflowDependencyJob<Result = unknown> {
  name: string;
  id: string;
  queue: string;
  task: string;
  state: JobState | 'removed';
  /** What its handler returned (null when none, or when it did not complete). */
  result: Result | null;
  lastError: string | null;
}

/** What a batch's callback is told through ctx.batch(). */
export interface BatchCounts {
  total: number;
  completed: number;
  discarded: number;
  cancelled: number;
}

/** A workflow, as getWorkflow() and the CLI read it. */
export interface Workflow {
  id: string;
  name: string;
  kind: 'workflow' | 'batch';
  insertedAt: Date;
  /** Jobs per state; a job removed on completion counts as completed. */
  counts: Partial<Record<JobState, number>>;
  /** finished when every job has (completed, discarded or cancelled). */
  state: 'running' | 'finished';
  jobs: WorkflowJobState[];
}

export interface WorkflowJobState {
  name: string;
  id: string;
  queue: string;
  task: string | null;
  state: JobState | 'removed';
  dependsOn: { name: string; ignoreFailure: boolean }[];
  lastError: string | null;
}

export interface WorkflowSummary {
  id: string;
  name: string;
  kind: 'workflow' | 'batch';
  insertedAt: Date;
  jobs: number;
  counts: Partial<Record<JobState, number>>;
  state: 'running' | 'finished';
}

export interface CancelWorkflowResult {
  id: string;
  /** How many of its jobs this call cancelled (those not finished yet). */
  cancelled: number;
}
