import type { StampededDatabase } from '../database/stampeded-database.js';
import { InvalidJobError } from '../errors/stampeded.errors.js';
import { taskNameOf } from '../decorators/task-metadata.js';
import {
  BATCH_CALLBACK_REQUIRED,
  BATCH_JOB_DEPENDS_ON,
  INVALID_OPTION,
  MANAGER_PER_JOB,
  OPTIONS_NOT_OBJECT,
  WORKFLOW_EMPTY,
  WORKFLOW_JOB_OPTION,
  WORKFLOW_NOT_FOUND,
  WORKFLOW_NOT_OBJECT,
} from '../stampeded.messages.js';
import { CANCEL_WORKFLOW, ENQUEUE_WORKFLOW, GET_WORKFLOW, LIST_WORKFLOWS, WORKFLOW_JOBS } from '../sql/workflows.sql.js';
import { arrayElement } from '../sql/statement.js';
import { describe, rejectUnknown, validateJobId } from '../queue/job-input.validator.js';
import type { JobRowBuilder } from '../queue/job-row.builder.js';
import type { JobInserter } from '../queue/job.inserter.js';
import { rowsToJson } from '../queue/job-row.serializer.js';
import type {
  BatchDefinition,
  CancelWorkflowResult,
  EnqueueWorkflowOptions,
  EnqueueWorkflowResult,
  FlowNode,
  Workflow,
  WorkflowDefinition,
  WorkflowJob,
  WorkflowSummary,
} from '../interfaces/workflow.interface.js';
import { flowToWorkflow, planWorkflow, type WorkflowEdge } from './workflow-graph.js';
import { toWorkflow, toWorkflowSummary } from './workflow.mapper.js';

/**
 * Workflows, flows and batches: each planned as a graph (workflow-graph.ts),
 * its jobs built as enqueue builds them, and inserted whole in one
 * statement; read and cancelled whole. docs/workflows.md.
 */
export class WorkflowService {
  constructor(
    private readonly db: StampededDatabase,
    private readonly rows: JobRowBuilder,
    private readonly inserter: JobInserter,
  ) {}

  enqueueWorkflow(definition: WorkflowDefinition, options: EnqueueWorkflowOptions): Promise<EnqueueWorkflowResult> {
    const where = 'enqueueWorkflow()';
    if (definition === null || typeof definition !== 'object') throw new InvalidJobError(WORKFLOW_NOT_OBJECT(where, '{ name, jobs }', definition));
    rejectUnknown(where, definition, ['name', 'jobs']);
    return this.insert(where, 'workflow', definition.name, definition.jobs, options);
  }

  enqueueFlow(root: FlowNode, options: EnqueueWorkflowOptions & { name?: string }): Promise<EnqueueWorkflowResult> {
    const where = 'enqueueFlow()';
    const { name, ...rest } = options ?? {};
    const jobs = flowToWorkflow(where, root);
    const rootJob = jobs[jobs.length - 1];
    return this.insert(where, 'workflow', name ?? taskNameOf(rootJob.task), jobs, rest);
  }

  enqueueBatch(definition: BatchDefinition, options: EnqueueWorkflowOptions): Promise<EnqueueWorkflowResult> {
    const where = 'enqueueBatch()';
    if (definition === null || typeof definition !== 'object') throw new InvalidJobError(WORKFLOW_NOT_OBJECT(where, '{ name, jobs, callback }', definition));
    rejectUnknown(where, definition, ['name', 'jobs', 'callback']);
    if (!Array.isArray(definition.jobs) || definition.jobs.length === 0) throw new InvalidJobError(WORKFLOW_EMPTY(where));
    if (definition.callback === null || typeof definition.callback !== 'object') throw new InvalidJobError(BATCH_CALLBACK_REQUIRED(where));
    const members = definition.jobs.map((job, i) => {
      if (job !== null && typeof job === 'object' && 'dependsOn' in job) throw new InvalidJobError(BATCH_JOB_DEPENDS_ON(where, i));
      return job;
    });
    const callback: WorkflowJob = {
      ...definition.callback,
      name: definition.callback.name ?? 'callback',
      dependsOn: members.map((job) => ({ name: job.name, ignoreFailure: true })),
    };
    return this.insert(where, 'batch', definition.name, [...members, callback], options);
  }

  async get(id: string): Promise<Workflow | null> {
    validateJobId('getWorkflow()', id);
    const [row] = await this.db.query(GET_WORKFLOW, [id]);
    if (!row) return null;
    const jobs = await this.db.query(WORKFLOW_JOBS, [id]);
    return toWorkflow(row, jobs);
  }

  async list(options: { limit?: number; before?: string; name?: string }): Promise<WorkflowSummary[]> {
    const where = 'workflows()';
    rejectUnknown(where, options, ['limit', 'before', 'name']);
    const limit = options.limit ?? 50;
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
      throw new InvalidJobError(INVALID_OPTION(where, 'limit', `must be an integer from 1 to 1000, got ${limit}`));
    }
    if (options.before !== undefined) validateJobId(where, options.before);
    const rows = await this.db.query(LIST_WORKFLOWS, [limit, options.before ?? null, options.name ?? null]);
    return rows.map(toWorkflowSummary);
  }

  async cancel(id: string, options: { reason?: string }): Promise<CancelWorkflowResult> {
    validateJobId('cancelWorkflow()', id);
    const [found] = await this.db.query(GET_WORKFLOW, [id]);
    if (!found) throw new InvalidJobError(WORKFLOW_NOT_FOUND(id));
    const [row] = await this.db.query<{ cancelled: number }>(CANCEL_WORKFLOW, [id, options.reason ?? null]);
    return { id, cancelled: row.cancelled };
  }

  private async insert(
    where: string,
    kind: 'workflow' | 'batch',
    name: unknown,
    jobs: readonly WorkflowJob[],
    options: EnqueueWorkflowOptions,
  ): Promise<EnqueueWorkflowResult> {
    if (typeof name !== 'string' || name.length === 0 || name.length > 200) {
      throw new InvalidJobError(INVALID_OPTION(where, 'name', `must be a non-empty string of 200 characters or fewer, got ${describe(name)}`));
    }
    if (options === null || typeof options !== 'object') throw new InvalidJobError(OPTIONS_NOT_OBJECT(where, '{ manager? }'));
    rejectUnknown(where, options, ['manager']);
    const graph = planWorkflow(where, jobs);
    const at = (i: number) => `${where} job ${JSON.stringify(graph.names[i])}`;
    const call = where === 'enqueueFlow()' ? 'enqueueFlow(root, { manager })' : `${where.replace('()', '')}(definition, { manager })`;
    jobs.forEach((job, i) => {
      rejectUnknown(at(i), job, ['name', 'task', 'args', 'options', 'dependsOn']);
      if (job.options && 'manager' in job.options) throw new InvalidJobError(MANAGER_PER_JOB(at(i), call));
      if (job.options && 'dedup' in job.options) throw new InvalidJobError(WORKFLOW_JOB_OPTION(at(i), 'dedup'));
      if (job.options && 'orderingKey' in job.options) throw new InvalidJobError(WORKFLOW_JOB_OPTION(at(i), 'orderingKey'));
    });
    const rows = await this.rows.build(jobs, at);
    const [workflowId] = this.inserter.ids.many(1);
    const ids = this.inserter.ids.many(rows.length);
    const extra = graph.names.map((step, i) => `"step":${JSON.stringify(step)},"deps_pending":${graph.waitsFor[i]}`);
    // The edges as five array literals of one element an edge (ENQUEUE_WORKFLOW's $6-$10), each queue quoted once.
    const quoted = new Map<string, string>();
    const queueOf = (i: number) => {
      let q = quoted.get(rows[i].queue);
      if (q === undefined) quoted.set(rows[i].queue, (q = arrayElement(rows[i].queue)));
      return q;
    };
    const literal = (element: (e: WorkflowEdge) => string) => `{${graph.edges.map(element).join(',')}}`;
    await this.inserter.query(
      ENQUEUE_WORKFLOW,
      [
        ...rowsToJson(rows, ids, extra),
        workflowId,
        name,
        kind,
        literal((e) => queueOf(e.from)),
        literal((e) => ids[e.from]),
        literal((e) => queueOf(e.to)),
        literal((e) => ids[e.to]),
        literal((e) => (e.ignoreFailure ? 't' : 'f')),
      ],
      options.manager,
    );
    return { id: workflowId, jobs: Object.fromEntries(graph.names.map((step, i) => [step, ids[i]])) };
  }
}
