export { StampededDashboardModule, DashboardConfigError, resolveDashboardOptions } from './dashboard.module.js';
export type { StampededDashboardOptions, DashboardAuth, DashboardAuthFunction, BasicAuthCredentials } from './interfaces/dashboard-options.interface.js';
// The inspector's names, as its own entry point (@stampeded/dashboard/inspector) exports them.
export * from './inspector/index.js';
export { CSRF_COOKIE, CSRF_HEADER, CSRF_FIELD } from './dashboard.constants.js';
export { StampededHealthIndicator, StampededHealthModule } from './health/stampeded.health.js';
export type { StampededHealthOptions, StampededHealthResult } from './health/stampeded.health.js';
export { StampededMetricsModule } from './metrics/metrics.module.js';
export type { StampededMetricsOptions } from './metrics/metrics.module.js';
export { StampededMetrics } from './metrics/stampeded-metrics.js';
