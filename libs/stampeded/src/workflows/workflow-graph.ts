import { InvalidJobError } from '../errors/stampeded.errors.js';
import {
  FLOW_CHILDREN_NOT_ARRAY,
  FLOW_NODE_NOT_OBJECT,
  FLOW_NODE_UNKNOWN_KEYS,
  WORKFLOW_BAD_DEPENDENCY,
  WORKFLOW_BAD_NAME,
  WORKFLOW_CYCLE,
  WORKFLOW_DUPLICATE_NAME,
  WORKFLOW_EMPTY,
  WORKFLOW_TOO_LARGE,
  WORKFLOW_UNKNOWN_DEPENDENCY,
} from '../stampeded.messages.js';
import { describe } from '../queue/job-input.validator.js';
import type { FlowNode, WorkflowDependency, WorkflowJob } from '../interfaces/workflow.interface.js';

/** The most jobs one workflow takes: one statement carries them all. */
export const MAX_WORKFLOW_JOBS = 100_000;
const MAX_NAME_LENGTH = 200;

/** One edge: job `from` (by position) must finish before job `to` runs. */
export interface WorkflowEdge {
  from: number;
  to: number;
  ignoreFailure: boolean;
}

export interface WorkflowGraph {
  names: string[];
  edges: WorkflowEdge[];
  /** How many jobs each job waits for, by position. */
  waitsFor: number[];
}

/**
 * Checks a workflow's jobs and their dependencies before anything is
 * written: every job named, each name once, every dependency a job of the
 * workflow, named once per job, and no cycle. Answers the edges by position.
 */
export function planWorkflow(where: string, jobs: readonly WorkflowJob[]): WorkflowGraph {
  if (!Array.isArray(jobs) || jobs.length === 0) throw new InvalidJobError(WORKFLOW_EMPTY(where));
  if (jobs.length > MAX_WORKFLOW_JOBS) throw new InvalidJobError(WORKFLOW_TOO_LARGE(where, jobs.length, MAX_WORKFLOW_JOBS));
  const position = new Map<string, number>();
  const names = jobs.map((job, i) => {
    const name = job?.name;
    if (typeof name !== 'string' || name.length === 0 || name.length > MAX_NAME_LENGTH)
      throw new InvalidJobError(WORKFLOW_BAD_NAME(`${where} job #${i}`, describe(name)));
    const first = position.get(name);
    if (first !== undefined) throw new InvalidJobError(WORKFLOW_DUPLICATE_NAME(where, name, first, i));
    position.set(name, i);
    return name;
  });
  const edges: WorkflowEdge[] = [];
  const waitsFor = new Array<number>(jobs.length).fill(0);
  const dependents: number[][] = jobs.map(() => []);
  jobs.forEach((job, to) => {
    const deps: readonly WorkflowDependency[] | undefined = job.dependsOn;
    if (deps === undefined) return;
    if (!Array.isArray(deps)) throw new InvalidJobError(WORKFLOW_BAD_DEPENDENCY(where, names[to], `must be an array, got ${describe(deps)}`));
    const seen = new Set<number>();
    for (const dep of deps) {
      const depName = typeof dep === 'string' ? dep : dep !== null && typeof dep === 'object' ? dep.name : undefined;
      if (typeof depName !== 'string') throw new InvalidJobError(WORKFLOW_BAD_DEPENDENCY(where, names[to], `has ${describe(dep)}`));
      if (typeof dep === 'object') {
        const unknown = Object.keys(dep).filter((k) => k !== 'name' && k !== 'ignoreFailure');
        if (unknown.length)
          throw new InvalidJobError(WORKFLOW_BAD_DEPENDENCY(where, names[to], `entry ${JSON.stringify(depName)} has unknown option(s) ${unknown.join(', ')}`));
        if (dep.ignoreFailure !== undefined && typeof dep.ignoreFailure !== 'boolean') {
          throw new InvalidJobError(WORKFLOW_BAD_DEPENDENCY(where, names[to], `entry ${JSON.stringify(depName)}: ignoreFailure must be a boolean`));
        }
      }
      const from = position.get(depName);
      if (from === undefined) throw new InvalidJobError(WORKFLOW_UNKNOWN_DEPENDENCY(where, names[to], depName));
      if (from === to) throw new InvalidJobError(WORKFLOW_CYCLE(where, [depName, depName]));
      if (seen.has(from)) throw new InvalidJobError(WORKFLOW_BAD_DEPENDENCY(where, names[to], `names ${JSON.stringify(depName)} twice`));
      seen.add(from);
      edges.push({ from, to, ignoreFailure: typeof dep === 'object' && dep.ignoreFailure === true });
      waitsFor[to]++;
      dependents[from].push(to);
    }
  });
  const cycle = findCycle(jobs.length, dependents, waitsFor);
  if (cycle)
    throw new InvalidJobError(
      WORKFLOW_CYCLE(
        where,
        cycle.map((i) => names[i]),
      ),
    );
  return { names, edges, waitsFor };
}

/**
 * A cycle, as positions with the first repeated at the end, or undefined.
 * Kahn's order removes every job that is not on or behind a cycle; a walk
 * back along dependencies from what is left must come round.
 */
function findCycle(count: number, dependents: number[][], waitsFor: number[]): number[] | undefined {
  const left = [...waitsFor];
  const ready: number[] = [];
  for (let i = 0; i < count; i++) if (left[i] === 0) ready.push(i);
  let done = 0;
  while (ready.length) {
    const i = ready.pop()!;
    done++;
    for (const d of dependents[i]) if (--left[d] === 0) ready.push(d);
  }
  if (done === count) return undefined;
  // Every job left waits for at least one other job left: follow those until one repeats.
  const waitingOn: number[][] = Array.from({ length: count }, () => []);
  for (let from = 0; from < count; from++) for (const to of dependents[from]) if (left[to] > 0 && left[from] > 0) waitingOn[to].push(from);
  let at = left.findIndex((n) => n > 0);
  const seenAt = new Map<number, number>();
  const path: number[] = [];
  while (!seenAt.has(at)) {
    seenAt.set(at, path.length);
    path.push(at);
    at = waitingOn[at][0];
  }
  return [...path.slice(seenAt.get(at)!), at].reverse();
}

/**
 * A BullMQ-style tree as a workflow: each node waits for its children.
 * Unnamed nodes are named by their position ("0" the root, "0.1" its second
 * child, ...).
 */
export function flowToWorkflow(where: string, root: FlowNode): WorkflowJob[] {
  const jobs: WorkflowJob[] = [];
  const visit = (node: FlowNode, path: string): string => {
    if (node === null || typeof node !== 'object') throw new InvalidJobError(FLOW_NODE_NOT_OBJECT(where, path));
    const unknown = Object.keys(node).filter((k) => !['name', 'task', 'args', 'options', 'ignoreChildFailure', 'children'].includes(k));
    if (unknown.length) throw new InvalidJobError(FLOW_NODE_UNKNOWN_KEYS(where, path, unknown));
    if (node.children !== undefined && !Array.isArray(node.children)) throw new InvalidJobError(FLOW_CHILDREN_NOT_ARRAY(where, path));
    const name = node.name ?? path;
    const children = (node.children ?? []).map((child, i) => visit(child, `${path}.${i}`));
    jobs.push({
      name,
      task: node.task,
      args: node.args,
      options: node.options,
      dependsOn: children.map((child) => ({ name: child, ignoreFailure: node.ignoreChildFailure === true })),
    });
    return name;
  };
  visit(root, '0');
  return jobs;
}
