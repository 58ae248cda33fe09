// A second entry point, @stampeded/dashboard/inspector, without Nest: the CLI
// loads only this, so that a command starts in a fraction of the time that
// loading the Nest module and its dependencies takes.
export { StampededInspector } from './stampeded-inspector.js';
export { InspectorInputError } from './inspector-input.js';
export { encodeCursor } from './job-cursor.js';
export { policyFromInput } from './queue-policy.js';
export { workflowCountsText, workflowTree } from './workflow-tree.js';
export type { WorkflowTreeLine } from './workflow-tree.js';
export type { InspectorDatabase, InspectorReads } from './inspector-database.js';
export type { QueueSummary, ThroughputBucket } from './queue-inspector.js';
export type { JobPage } from './job-inspector.js';
export type { ActionResult } from './job-actions.js';
export type { RedriveOptions, RedriveResult, PruneOptions } from './maintenance-actions.js';
export { INSIGHTS_RANGES } from './insights-inspector.js';
export type { Insights, InsightsPoint, InsightsRange, BusyKey, Percentiles, OutcomeCounts } from './insights-inspector.js';
