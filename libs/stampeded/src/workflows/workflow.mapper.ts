import type { JobState } from '../interfaces/job.interface.js';
import type { Workflow, WorkflowJobState, WorkflowSummary } from '../interfaces/workflow.interface.js';

const FINISHED = new Set(['completed', 'discarded', 'cancelled', 'removed']);

/** A workflow's jobs counted by state; one removed on completion counts as completed. */
function countStates(states: Record<string, number>): Partial<Record<JobState, number>> {
  const counts: Partial<Record<JobState, number>> = {};
  for (const [state, n] of Object.entries(states)) {
    const key = (state === 'removed' ? 'completed' : state) as JobState;
    counts[key] = (counts[key] ?? 0) + Number(n);
  }
  return counts;
}

function stateOf(states: Record<string, number>): 'running' | 'finished' {
  return Object.entries(states).every(([state, n]) => Number(n) === 0 || FINISHED.has(state)) ? 'finished' : 'running';
}

export function toWorkflowSummary(row: Record<string, any>): WorkflowSummary {
  const states: Record<string, number> = row.counts ?? {};
  return {
    id: row.id,
    name: row.name,
    kind: row.kind,
    insertedAt: row.inserted_at,
    jobs: row.jobs,
    counts: countStates(states),
    state: stateOf(states),
  };
}

export function toWorkflow(row: Record<string, any>, jobRows: Record<string, any>[]): Workflow {
  const jobs: WorkflowJobState[] = jobRows.map((j) => ({
    name: j.name,
    id: j.id,
    queue: j.queue,
    task: j.task ?? null,
    state: j.state,
    dependsOn: j.depends_on,
    lastError: j.last_error ?? null,
  }));
  const states: Record<string, number> = {};
  for (const job of jobs) states[job.state] = (states[job.state] ?? 0) + 1;
  return { id: row.id, name: row.name, kind: row.kind, insertedAt: row.inserted_at, counts: countStates(states), state: stateOf(states), jobs };
}
