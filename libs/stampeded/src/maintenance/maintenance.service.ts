import { Inject, Injectable, Logger, type BeforeApplicationShutdown, type OnApplicationBootstrap } from '@nestjs/common';
import { Subject, type Observable } from 'rxjs';
import { STAMPEDED_OPTIONS } from '../stampeded.constants.js';
import { NO_MAINTENANCE_SERVICE } from '../stampeded.messages.js';
import { StampededDatabase } from '../database/stampeded-database.js';
import { RECOUNT_QUEUE } from '../sql/maintenance.sql.js';
import type { StampededModuleOptions } from '../interfaces/stampeded-options.interface.js';
import type { MaintenanceEvent, MaintenanceHealth, MaintenanceTaskName } from '../interfaces/maintenance.interface.js';
import { resolveMaintenanceConfig, type MaintenanceConfig } from './maintenance.config.js';
import { LeaderElection } from './leader-election.js';
import { LeaderLease } from './leader-lease.js';
import type { MaintenanceTask } from './maintenance-task.js';
import { JobReaper } from './job-reaper.js';
import { JobExpirer } from './job-expirer.js';
import { OrderingSweeper } from './ordering-sweeper.js';
import { JobPruner } from './job-pruner.js';
import { PartitionRepairer } from './partition-repairer.js';
import { Reindexer } from './reindexer.js';
import { InsightsRollup } from './insights-rollup.js';
import { takeHealthSnapshot } from './health-reporter.js';
import { VacuumWatch } from './vacuum-watch.js';
import { QueuePlanner } from '../control/queue-planner.js';
import { resolveControlConfig } from '../control/control.config.js';

/**
 * The fleet's upkeep. Every process with maintenance enabled stands for
 * election; the one leader runs each service on its own interval -- at once
 * when elected, so that a new leader after a crash reaps straight away --
 * and stops them the moment it is deposed. Any process can ask for a health
 * snapshot, a recount, or a service run now.
 */
@Injectable()
export class MaintenanceService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Stampeded');
  private readonly subject = new Subject<MaintenanceEvent>();
  /** elected, deposed, and every service run: wait on these in tests, not on time. */
  readonly events$: Observable<MaintenanceEvent> = this.subject.asObservable();
  readonly config: MaintenanceConfig;
  private readonly tasks: MaintenanceTask[];
  private election?: LeaderElection | LeaderLease;
  private readonly timers = new Map<MaintenanceTaskName, NodeJS.Timeout>();
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Tasks whose slow runs spaced them out to twice their interval or more, and that have not been fast since. */
  private readonly spacedOut = new Set<MaintenanceTaskName>();
  private latestHealth?: MaintenanceHealth;
  /** When this process first saw each table due for a vacuum: what tells due from overdue. */
  private readonly vacuumWatch = new VacuumWatch();

  constructor(
    private readonly db: StampededDatabase,
    @Inject(STAMPEDED_OPTIONS) options: StampededModuleOptions,
  ) {
    this.config = resolveMaintenanceConfig(options.maintenance, options.worker?.heartbeatIntervalMs);
    this.tasks = [
      new JobReaper(db, this.config),
      new JobExpirer(db, this.config),
      new OrderingSweeper(db, this.config),
      new JobPruner(db, this.config),
      new PartitionRepairer(db, this.config),
      {
        name: 'health',
        intervalMs: this.config.healthIntervalMs,
        runOnce: async () => {
          const health = await this.health();
          const behind = health.vacuumBehind;
          this.latestHealth = health;
          if (behind.length || health.sparseIndexes.length || health.brokenPartitions.length) {
            this.logger.warn(
              `health: tables autovacuum is not reaching (overdue, or off for them) [${behind.join(', ')}], ` +
                `sparse indexes [${health.sparseIndexes.join(', ')}], partitions missing triggers [${health.brokenPartitions.join(', ')}]`,
            );
          }
          return {
            needsVacuum: health.needsVacuum,
            vacuumBehind: behind,
            sparseIndexes: health.sparseIndexes,
            brokenPartitions: health.brokenPartitions,
          };
        },
      },
      ...(this.config.reindex ? [new Reindexer(db, this.config)] : []),
      ...(this.config.insights ? [new InsightsRollup(db, this.config)] : []),
      // Queue control's planner: the queues' verdicts, every few seconds.
      new QueuePlanner(db, resolveControlConfig(options.control)),
    ];
  }

  /** Whether this process is the maintenance leader now. */
  get isLeader(): boolean {
    return this.election?.isLeader ?? false;
  }

  /** The leader's latest snapshot, taken every healthIntervalMs; undefined in a follower. */
  get lastHealth(): MaintenanceHealth | undefined {
    return this.latestHealth;
  }

  onApplicationBootstrap(): void {
    if (!this.config.enabled) return;
    // A session lock where connections are sessions; a lease row behind a transaction-mode pooler.
    const Election = this.db.session ? LeaderElection : LeaderLease;
    this.election = new Election(this.db, this.config.leaderCheckIntervalMs, {
      onElected: () => {
        this.logger.log(`maintenance leader elected in this process (pid ${process.pid})`);
        this.subject.next({ type: 'elected' });
        for (const task of this.tasks) this.schedule(task, firstRunDelayMs(task));
      },
      onDeposed: (reason) => {
        this.logger.warn(`maintenance leader stepped down: ${reason}`);
        this.stopTimers();
        this.subject.next({ type: 'deposed', reason });
      },
    });
    this.election.start();
  }

  private schedule(task: MaintenanceTask, delayMs: number): void {
    const timer = setTimeout(async () => {
      if (!this.isLeader) return;
      const started = Date.now();
      await this.run(task.name).catch(() => {});
      if (this.isLeader && this.timers.get(task.name) === timer) this.schedule(task, this.spaced(task, Date.now() - started));
    }, delayMs).unref();
    this.timers.set(task.name, timer);
  }

  /**
   * The delay before a task's next run. The leader warns when a slow run
   * spaces a task out to twice its interval or more, and says when its runs
   * are fast again; not for every run near the threshold.
   */
  private spaced(task: MaintenanceTask, lastRunMs: number): number {
    const delayMs = nextRunDelayMs(task, lastRunMs);
    const seconds = (ms: number) => `${Math.round(ms / 1000)} s`;
    if (delayMs >= 2 * task.intervalMs && !this.spacedOut.has(task.name)) {
      this.spacedOut.add(task.name);
      this.logger.warn(
        `maintenance ${task.name} took ${(lastRunMs / 1000).toFixed(1)} s: it runs every ${seconds(delayMs)} ` +
          `instead of every ${seconds(task.intervalMs)} while it is this slow. Most often a session holding a snapshot open ` +
          `(a long transaction, one idle in transaction) is why: its scan of the running jobs reads again every job claimed since.`,
      );
    } else if (delayMs === task.intervalMs && this.spacedOut.delete(task.name)) {
      this.logger.log(`maintenance ${task.name} is fast again (${lastRunMs} ms): back to every ${seconds(task.intervalMs)}`);
    }
    return delayMs;
  }

  /**
   * Runs one service now, in this process, leader or not: every service is
   * safe to run alongside the leader's (SKIP LOCKED, fenced updates,
   * idempotent repairs). For tests, the CLI and an operator in a hurry.
   */
  async run(name: MaintenanceTaskName): Promise<Record<string, unknown>> {
    const task =
      this.tasks.find((t) => t.name === name) ??
      (name === 'reindexer' ? new Reindexer(this.db, this.config) : name === 'insights' ? new InsightsRollup(this.db, this.config) : undefined);
    if (!task) throw new Error(NO_MAINTENANCE_SERVICE(name, [...new Set([...this.tasks.map((t) => t.name), 'reindexer', 'insights'])]));
    const started = Date.now();
    const running = task.runOnce();
    this.inFlight.add(running);
    try {
      const result = await running;
      this.subject.next({ type: 'ran', task: task.name, result, durationMs: Date.now() - started });
      return result;
    } catch (err) {
      const message = (err as Error)?.message ?? String(err);
      this.logger.error(`maintenance ${task.name} failed: ${message}`);
      this.subject.next({ type: 'failed', task: task.name, error: message });
      throw err;
    } finally {
      this.inFlight.delete(running);
    }
  }

  /** vacuum health, index density and partition triggers, as one report. */
  health(): Promise<MaintenanceHealth> {
    return takeHealthSnapshot(this.db, this.isLeader, this.vacuumWatch);
  }

  /** Rebuilds a queue's counts from its jobs: after an UNLOGGED counters table was emptied by a crash, say. */
  async recountQueue(queue: string): Promise<void> {
    await this.db.query(RECOUNT_QUEUE, [queue]);
  }

  private stopTimers(): void {
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopTimers();
    await this.election?.stop();
    await Promise.allSettled([...this.inFlight]);
    this.subject.complete();
  }
}

/** How many times its last run's duration a task spaced by its cost waits. */
const COST_SPACING = 10;

/**
 * When a task runs next, from how long its last run took. Most wait their
 * interval. The expirer and the reaper read every running job through the
 * claimed index, and while a session holds a snapshot open each job claimed
 * since leaves a dead entry there that every run walks again: at 4,000 jobs
 * a second, 0.03 s a run as the snapshot was taken, 5.7 s each ten minutes
 * later, every 30 s (bench/RESULTS.md, "Maintenance scans"). Waiting ten
 * times their last run, they keep to a tenth of a backend however long the
 * snapshot lasts, and what they would find waits that much longer.
 */
export function nextRunDelayMs(task: MaintenanceTask, lastRunMs: number): number {
  return task.spacedByCost ? Math.max(task.intervalMs, Math.round(lastRunMs * COST_SPACING)) : task.intervalMs;
}

/**
 * What a new leader runs at once: what recovers jobs and steers workers, and
 * the insights rollup, which the pruner waits for (and which reads only the
 * jobs finished since the last leader's run).
 */
const AT_ELECTION: ReadonlySet<MaintenanceTaskName> = new Set(['reaper', 'expirer', 'ordering', 'planner', 'insights']);
/** The latest a new leader's first prune, repair or health report waits. */
const FIRST_RUN_SPREAD_MAX_MS = 60_000;

/**
 * When a new leader first runs a task. Reaping, expiry and the planner run
 * at once; the rest start somewhere in the second half of their interval (at
 * most a minute): all of them at once make every new leader, at every deploy,
 * a burst of catalogue and index reads beside the claims, which the jobs
 * running then feel in their latency (docs/maintenance.md has the figures).
 * A task never waits longer than its own interval.
 */
export function firstRunDelayMs(task: MaintenanceTask, random: () => number = Math.random): number {
  if (AT_ELECTION.has(task.name)) return 0;
  const spread = Math.min(task.intervalMs, FIRST_RUN_SPREAD_MAX_MS);
  return Math.round(spread / 2 + (random() * spread) / 2);
}
