import { firstRunDelayMs, nextRunDelayMs } from './maintenance.service.js';
import type { MaintenanceTask } from './maintenance-task.js';

const task = (name: MaintenanceTask['name'], intervalMs: number, spacedByCost = false) =>
  ({ name, intervalMs, spacedByCost, runOnce: async () => ({}) }) as MaintenanceTask;

describe('firstRunDelayMs', () => {
  it('runs what recovers jobs and steers workers at once, and the rollup the pruner waits for', () => {
    for (const name of ['reaper', 'expirer', 'ordering', 'planner', 'insights'] as const) expect(firstRunDelayMs(task(name, 30_000), () => 1)).toBe(0);
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

describe('nextRunDelayMs', () => {
  it('waits the interval after a run that took less than a tenth of it', () => {
    expect(nextRunDelayMs(task('expirer', 30_000, true), 40)).toBe(30_000);
    expect(nextRunDelayMs(task('expirer', 30_000, true), 3_000)).toBe(30_000);
  });

  it('waits ten times a slow run of a task spaced by its cost, and only the interval for the rest', () => {
    expect(nextRunDelayMs(task('expirer', 30_000, true), 5_700)).toBe(57_000);
    expect(nextRunDelayMs(task('reaper', 30_000, true), 12_000)).toBe(120_000);
    // A prune tick that deleted a backlog for a minute goes on with the rest of it.
    expect(nextRunDelayMs(task('pruner', 60_000), 60_000)).toBe(60_000);
  });
});
