import type { MaintenanceTaskName } from '../interfaces/maintenance.interface.js';

/**
 * One of the leader's services, in River's shape: an interval, and a runOnce
 * that does a bounded amount of work and says what it did.
 */
export interface MaintenanceTask {
  readonly name: MaintenanceTaskName;
  readonly intervalMs: number;
  /** Waits ten times its last run's duration when that is longer than its interval (nextRunDelayMs()). */
  readonly spacedByCost?: boolean;
  runOnce(): Promise<Record<string, unknown>>;
}
