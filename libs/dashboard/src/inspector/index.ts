// A second entry point, @stampeded/dashboard/inspector, without Nest: the CLI
// loads only this, so that a command starts in a fraction of the time that
// loading the Nest module and its dependencies takes.
export { StampededInspector, InspectorInputError, encodeCursor } from './stampeded-inspector.js';
export { workflowCountsText, workflowTree } from './workflow-tree.js';
export type { WorkflowTreeLine } from './workflow-tree.js';
export type {
  InspectorDatabase,
  QueueSummary,
  ThroughputBucket,
  JobPage,
  ActionResult,
  RedriveOptions,
  RedriveResult,
  PruneOptions,
} from './stampeded-inspector.js';
