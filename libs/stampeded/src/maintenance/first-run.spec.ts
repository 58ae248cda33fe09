import { firstRunDelayMs } from './maintenance.service.js';
import type { MaintenanceTask } from './maintenance-task.js';

const task = (name: MaintenanceTask['name'], intervalMs: number) => ({ name, intervalMs, runOnce: async () => ({}) }) as MaintenanceTask;

describe('firstRunDelayMs', () => {
  it('runs what recovers jobs and steers workers at once', () => {
    for (const name of ['reaper', 'expirer', 'key-lines', 'planner'] as const) expect(firstRunDelayMs(task(name, 30_000), () => 1)).toBe(0);
  });

  it('spreads the rest over the second half of their interval, a minute at most', () => {
    expect(firstRunDelayMs(task('pruner', 60_000), () => 0)).toBe(30_000);
    expect(firstRunDelayMs(task('pruner', 60_000), () => 1)).toBe(60_000);
    expect(firstRunDelayMs(task('health', 300_000), () => 1)).toBe(60_000);
    expect(firstRunDelayMs(task('partitions', 300_000), () => 0.5)).toBe(45_000);
    // A short interval (tests, a busy install) is never waited out longer than itself.
    expect(firstRunDelayMs(task('pruner', 200), () => 1)).toBe(200);
  });
});
