export { StampededDashboardModule, DashboardConfigError, resolveDashboardOptions } from './dashboard.module.js';
export type {
  StampededDashboardOptions,
  DashboardAuth,
  DashboardAuthFunction,
  BasicAuthCredentials,
} from './interfaces/dashboard-options.interface.js';
export { StampededInspector, InspectorInputError, STATES, encodeCursor } from './inspector/stampeded-inspector.js';
export type {
  InspectorDatabase,
  QueueSummary,
  ThroughputBucket,
  JobPage,
  ActionResult,
  RedriveOptions,
  RedriveResult,
  PruneOptions,
  State,
} from './inspector/stampeded-inspector.js';
export { CSRF_COOKIE, CSRF_HEADER, CSRF_FIELD } from './dashboard.constants.js';
export { StampededHealthIndicator, StampededHealthModule } from './health/stampeded.health.js';
export type { StampededHealthOptions, StampededHealthResult } from './health/stampeded.health.js';
export { StampededMetricsModule } from './metrics/metrics.module.js';
export type { StampededMetricsOptions } from './metrics/metrics.module.js';
export { StampededMetrics } from './metrics/stampeded-metrics.js';
