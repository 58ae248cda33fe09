import type { MaintenanceTaskName } from '../interfaces/maintenance.interface.js';

/**
 * One of the leader's services, in River's shape: an interval, and a runOnce
 * that does a bounded amount of work and says what it did.
 */
export interface MaintenanceTask {
  readonly name: MaintenanceTaskName;
  readonly intervalMs: number;
  runOnce(): Promise<Record<string, unknown>>;
}
