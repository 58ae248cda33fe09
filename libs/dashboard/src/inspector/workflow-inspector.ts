import type { CancelWorkflowResult, Workflow, WorkflowSummary } from '@stampeded/nestjs';
import { CANCEL_WORKFLOW, GET_WORKFLOW, LIST_WORKFLOWS, toWorkflow, toWorkflowSummary, WORKFLOW_JOBS } from '@stampeded/nestjs/internal';
import { BAD_WORKFLOW_LIMIT } from '../dashboard.messages.js';
import type { InspectorDatabase } from './inspector-database.js';
import { InspectorInputError, assertWorkflowId } from './inspector-input.js';

/** Workflows and batches, and the cancel of one: the core's statements, as QueueService reads and cancels them. */
export class WorkflowInspector {
  constructor(private readonly db: InspectorDatabase) {}

  /** Newest first, with their jobs counted by state. */
  async workflows(options: { limit?: number | string; name?: string } = {}): Promise<WorkflowSummary[]> {
    const limit = options.limit === undefined || options.limit === '' ? 50 : Number(options.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new InspectorInputError(BAD_WORKFLOW_LIMIT(options.limit));
    const rows = await this.db.query(LIST_WORKFLOWS, [limit, null, options.name || null]);
    return rows.map(toWorkflowSummary);
  }

  /** One workflow with each job's state and what it waits for, or null. */
  async workflow(id: string): Promise<Workflow | null> {
    assertWorkflowId(id);
    const [row] = await this.db.query(GET_WORKFLOW, [id]);
    if (!row) return null;
    return toWorkflow(row, await this.db.query(WORKFLOW_JOBS, [id]));
  }

  /** Cancels every unfinished job of a workflow, as QueueService.cancelWorkflow() does; null when there is no such workflow. */
  async cancelWorkflow(id: string, reason?: string): Promise<CancelWorkflowResult | null> {
    assertWorkflowId(id);
    const [found] = await this.db.query(GET_WORKFLOW, [id]);
    if (!found) return null;
    const [row] = await this.db.query<{ cancelled: number }>(CANCEL_WORKFLOW, [id, reason || null]);
    return { id, cancelled: row.cancelled };
  }
}
