// The messages of workflows, batches and flows, re-exported by stampeded.messages.ts: each says what was wrong and what to do.

export const WORKFLOW_EMPTY = (where: string) => `${where}: a workflow needs at least one job in \`jobs\`. Nothing was enqueued.`;

export const WORKFLOW_TOO_LARGE = (where: string, count: number, max: number) =>
  `${where}: ${count} jobs is more than one workflow takes (${max}). Split it into workflows of ${max} jobs or fewer, ` +
  `or chain them: the last job of one can enqueue the next. Nothing was enqueued.`;

export const WORKFLOW_BAD_NAME = (where: string, value: string) =>
  `${where}: each job needs a \`name\`, a non-empty string of 200 characters or fewer that is unique in the workflow, got ${value}. ` + `Nothing was enqueued.`;

export const WORKFLOW_DUPLICATE_NAME = (where: string, name: string, first: number, second: number) =>
  `${where}: jobs #${first} and #${second} are both named ${JSON.stringify(name)}; ` +
  `a name says which job dependsOn means, so each must be unique in the workflow. Nothing was enqueued.`;

export const WORKFLOW_UNKNOWN_DEPENDENCY = (where: string, job: string, dependency: string) =>
  `${where}: job ${JSON.stringify(job)} depends on ${JSON.stringify(dependency)}, which is not a job of this workflow. ` +
  `dependsOn names jobs of the same call: add that job, or fix the name. Nothing was enqueued.`;

export const WORKFLOW_BAD_DEPENDENCY = (where: string, job: string, problem: string) =>
  `${where}: job ${JSON.stringify(job)}: dependsOn ${problem}. ` + `Each entry is a job's name, or { name, ignoreFailure? }. Nothing was enqueued.`;

export const WORKFLOW_CYCLE = (where: string, cycle: string[]) =>
  `${where}: the jobs wait for each other in a cycle (${cycle.map((n) => JSON.stringify(n)).join(' -> ')}), so none of them could ever run. ` +
  `A workflow's dependencies must form a DAG: remove one of these dependencies. Nothing was enqueued.`;

export const FLOW_NODE_NOT_OBJECT = (where: string, path: string) =>
  `${where}: the node at ${path} must be an object { task, args?, options?, children? }. Nothing was enqueued.`;

export const FLOW_NODE_UNKNOWN_KEYS = (where: string, path: string, unknown: string[]) =>
  `${where}: the node at ${path} has unknown key(s) ${unknown.join(', ')}; a node is { name?, task, args?, options?, ignoreChildFailure?, children? }. ` +
  `Nothing was enqueued.`;

export const FLOW_CHILDREN_NOT_ARRAY = (where: string, path: string) =>
  `${where}: children of the node at ${path} must be an array of nodes. Nothing was enqueued.`;

export const WORKFLOW_NOT_FOUND = (id: string) =>
  `No workflow with id ${id}. It may have been pruned with its jobs, or the id belongs to a job: a job's workflow is in getWorkflow(id) of its workflow id.`;

export const WORKFLOW_NOT_OBJECT = (where: string, shape: string, got: unknown) => `${where} takes ${shape}, got ${typeof got}.`;

export const WORKFLOW_JOB_OPTION = (at: string, option: 'dedup' | 'orderingKey') =>
  option === 'dedup'
    ? `${at}: a workflow job takes no dedup: the workflow is enqueued whole or not at all.`
    : `${at}: a workflow job takes no orderingKey: dependsOn orders the workflow, and a job of it waiting ahead in a key's order would hold the key.`;

export const BATCH_CALLBACK_REQUIRED = (where: string) =>
  `${where}: callback must be a job { task, args?, options?, name? } that runs when the batch has finished.`;

export const BATCH_JOB_DEPENDS_ON = (where: string, index: number) =>
  `${where}: job #${index} has dependsOn; a batch's jobs run independently. Use enqueueWorkflow() for dependencies.`;

export const NOT_IN_WORKFLOW = (id: string, method: string) =>
  `ctx.${method}() in job ${id}: this job is not part of a workflow or batch, so it has nothing to read. ` +
  `Enqueue it with enqueueWorkflow(), enqueueFlow() or enqueueBatch().`;
