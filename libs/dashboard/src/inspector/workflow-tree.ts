import { JOB_STATES, type JobState } from '@stampeded/nestjs/internal';
import type { WorkflowJobState } from '@stampeded/nestjs';

export interface WorkflowTreeLine {
  /** 0 for a job that nothing in the workflow waits for; each level below is a job the line above waits for. */
  depth: number;
  job: WorkflowJobState;
  /** The job was shown in full higher up (a dependency shared by several jobs): its own dependencies are not repeated. */
  repeat: boolean;
  /** The job above runs even if this one fails (the edge's ignoreFailure). */
  ignoreFailure: boolean;
}

/**
 * A workflow's jobs as an indented tree, the way the CLI and the dashboard
 * show it: each job that nothing waits for at the top (a fan-in's sink, a
 * flow's parent, a batch's callback), and beneath each job what it waits for.
 * A graph can share a dependency between jobs; it is shown in full the first
 * time and named again, marked `repeat`, after that. Jobs keep the order the
 * workflow's statement gave them (enqueue order).
 */
export function workflowTree(jobs: readonly WorkflowJobState[]): WorkflowTreeLine[] {
  const byName = new Map(jobs.map((job) => [job.name, job]));
  const waitedFor = new Set(jobs.flatMap((job) => job.dependsOn.map((d) => d.name)));
  const lines: WorkflowTreeLine[] = [];
  const shown = new Set<string>();
  const visit = (job: WorkflowJobState, depth: number, ignoreFailure: boolean): void => {
    const repeat = shown.has(job.name);
    lines.push({ depth, job, repeat, ignoreFailure });
    if (repeat) return;
    shown.add(job.name);
    for (const dependency of job.dependsOn) {
      const next = byName.get(dependency.name);
      if (next) visit(next, depth + 1, dependency.ignoreFailure);
    }
  };
  for (const job of jobs) if (!waitedFor.has(job.name)) visit(job, 0, false);
  // A graph always has a job nothing waits for; this keeps a malformed one from hiding jobs.
  for (const job of jobs) if (!shown.has(job.name)) visit(job, 0, false);
  return lines;
}

/**
 * A workflow's jobs counted by state as one line of text, the way the CLI
 * and the dashboard show it ("pending 3, completed 7"): states in the core's
 * order (JOB_STATES, the way a job passes through them), whatever order the
 * counts came in; a state with no job left out.
 */
export function workflowCountsText(counts: Partial<Record<JobState, number>>): string {
  const rank = (state: string) => {
    const i = JOB_STATES.indexOf(state as JobState);
    return i < 0 ? JOB_STATES.length : i;
  };
  return Object.entries(counts)
    .filter(([, n]) => Number(n) > 0)
    .sort(([a], [b]) => rank(a) - rank(b))
    .map(([state, n]) => `${state} ${n}`)
    .join(', ');
}
