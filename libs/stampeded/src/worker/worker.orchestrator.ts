import {
  Inject,
  Injectable,
  Logger,
  Optional,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
  type OnModuleInit,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { STAMPEDED_OPTIONS, DEFAULT_QUEUE, DEFAULT_POLL_INTERVAL_MS, POLL_ONLY_INTERVAL_MS } from '../stampeded.constants.js';
import { StampededDatabase } from '../database/stampeded-database.js';
import { COMPLETE_MANY, COMPLETE_MANY_NOTIFY } from '../sql/jobs.sql.js';
import { CLAIM_BATCH } from '../sql/claim.sql.js';
import { TaskRegistry } from '../explorer/task.registry.js';
import { QueueRegistry } from '../queue/queue.registry.js';
import { JobEvents } from '../events/job-events.js';
import { ProcessTaskRunner } from '../isolation/process-task.runner.js';
import { QueueControlService } from '../control/queue-control.service.js';
import type { ControlGate } from '../control/control.gate.js';
import { NotificationListener } from '../database/notification-listener.js';
import { cancelChannel, eventsChannel, insertChannel, listeningChannel } from '../sql/notifications.sql.js';
import { FleetListeners } from './fleet-listeners.js';
import { WorkerRegistration } from './worker-registration.js';
import { CancelPoller } from './cancel-poller.js';
import { resolveMaintenanceConfig } from '../maintenance/maintenance.config.js';
import { Worker, type RunOutcome, type WorkerConfig } from './worker.js';
import type { Job } from '../interfaces/job.interface.js';
import type { StampededModuleOptions } from '../interfaces/stampeded-options.interface.js';
import { JOB_TRACER } from '../tracing/tracing.provider.js';
import { JobEncryption } from '../encryption/job-encryption.js';
import type { JobTracer } from '../tracing/job-tracer.js';

export interface DrainOptions {
  /** Only this queue. Default: every queue this app knows. */
  queue?: string;
  /** Also run jobs scheduled in the future (runAt, retry backoff), as if their time had come. */
  withScheduled?: boolean;
  /** Stop after this many runs, so a job that always retries cannot loop forever. Default 10,000. */
  maxJobs?: number;
}

export interface DrainResult {
  completed: number;
  retrying: number;
  discarded: number;
  cancelled: number;
  lost: number;
  released: number;
  /** Every job run, in order, as claimed. */
  jobs: Job[];
}

/**
 * Starts the worker when the app has bootstrapped and drains it when the app
 * shuts down: stop claiming, let handlers finish, give back the rest. The
 * connection pool closes only after that, so enqueues keep working during the
 * drain and outcomes are recorded.
 */
@Injectable()
export class WorkerOrchestrator implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly logger = new Logger('Stampeded');
  private worker?: Worker;
  private registration?: WorkerRegistration;
  private unlisten?: () => Promise<void>;
  private cancelPoller?: CancelPoller;
  private readonly processRunner = new ProcessTaskRunner();
  private readonly fleetListeners: FleetListeners;

  constructor(
    private readonly db: StampededDatabase,
    private readonly tasks: TaskRegistry,
    private readonly queues: QueueRegistry,
    private readonly events: JobEvents,
    @Inject(STAMPEDED_OPTIONS) private readonly options: StampededModuleOptions,
    private readonly control: QueueControlService,
    private readonly listener: NotificationListener,
    @Optional() @Inject(JOB_TRACER) private readonly tracer: JobTracer | null = null,
  ) {
    this.fleetListeners = new FleetListeners(db, events);
  }

  /** The queues this process claims from. */
  workedQueues(): string[] {
    if (this.options.worker?.queues?.length) return [...new Set(this.options.worker.queues)];
    const fromTasks = this.tasks.all().map((t) => t.metadata.queue ?? DEFAULT_QUEUE);
    return [...new Set([...fromTasks, ...this.queues.names()])];
  }

  get workerId(): string | undefined {
    return this.registration?.workerId;
  }

  // Before any bootstrap hook: a refused queue (a partition name another queue
  // holds) then fails the start before the maintenance leader, the scheduler
  // or a worker has begun, so a failed start leaves nothing running.
  async onModuleInit(): Promise<void> {
    await this.queues.provision(this.db);
  }

  async onApplicationBootstrap(): Promise<void> {
    const options = this.options.worker ?? {};
    if (options.enabled === false) return;
    const queues = this.workedQueues();
    if (queues.length === 0) return;

    this.registration = await WorkerRegistration.register(this.db, queues, options.metadata ?? {});
    // Read before the first claim, so that a paused queue is never claimed from.
    const gate = await this.control.gateFor(this.registration.workerId, queues, options.concurrency ?? 10);
    this.worker = this.createWorker(this.registration.workerId, queues, gate);
    // A missed notification costs latency, never a job: the worker polls as well.
    this.unlisten = await this.listener.subscribe({
      channels: {
        [insertChannel(this.db.schema)]: (queue) => {
          this.worker?.wake(queue);
          gate.arrived(queue);
        },
        [cancelChannel(this.db.schema)]: (jobId) => this.worker?.cancelled(jobId),
        ...(this.events.fleetWide ? { [listeningChannel(this.db.schema)]: (app: string) => this.fleetListeners.announced(app) } : {}),
      },
      onConnected: () => this.worker?.wake(),
    });
    // With no LISTEN (a transaction-mode pooler and no direct connection), the
    // poll finds new jobs and this finds cancels, at the same interval.
    if (!this.db.canListen) {
      this.cancelPoller = new CancelPoller(this.db, this.worker, this.pollIntervalMs());
      this.cancelPoller.start();
    }
    await this.fleetListeners.refresh();
    // Half the reaper's threshold: this worker stops its jobs before the
    // reaper can hand them to another, so that no job runs twice at once.
    const reapAfterMs = resolveMaintenanceConfig(this.options.maintenance, options.heartbeatIntervalMs).reapDeadAfterMs;
    this.registration.startHeartbeat(
      options.heartbeatIntervalMs ?? 5000,
      {
        afterMs: Math.max(reapAfterMs / 2, 2 * (options.heartbeatIntervalMs ?? 5000)),
        onLost: (reason) => void this.worker?.heartbeatLost(reason),
      },
      this.fleetListeners,
    );
    // The claim and the completion prepared on the connections the first
    // jobs will take: a claim of nothing and a completion of nothing.
    await this.db.warm([
      { statement: CLAIM_BATCH, values: [queues[0], this.registration.workerId, 0, null, null] },
      { statement: COMPLETE_MANY, values: [this.registration.workerId, '{}', '{}', '{}', null] },
      ...(this.events.fleetWide
        ? [{ statement: COMPLETE_MANY_NOTIFY, values: [this.registration.workerId, '{}', '{}', '{}', null, '{}', eventsChannel(this.db.schema)] }]
        : []),
    ]);
    this.worker.start();
    this.logger.log(`worker ${this.registration.workerId} claiming from ${queues.join(', ')} at concurrency ${options.concurrency ?? 10}`);
  }

  /**
   * The poll is a fallback where LISTEN wakes the worker, and the only
   * wake-up where it cannot: then it runs twice as often by default.
   */
  private pollIntervalMs(): number {
    return this.options.worker?.pollIntervalMs ?? (this.db.canListen ? DEFAULT_POLL_INTERVAL_MS : POLL_ONLY_INTERVAL_MS);
  }

  private createWorker(workerId: string, queues: string[], control?: ControlGate): Worker {
    const options = this.options.worker ?? {};
    const concurrency = options.concurrency ?? 10;
    const config: WorkerConfig = {
      workerId,
      queues,
      concurrency,
      prefetch: options.prefetch ?? 'auto',
      claimBatchSize: options.claimBatchSize ?? 500,
      completionBatchSize: options.completionBatchSize ?? 500,
      pollIntervalMs: this.pollIntervalMs(),
      queueConcurrency: new Map(
        this.queues
          .names()
          .map((name) => [name, this.queues.get(name)?.concurrency] as const)
          .filter((e): e is readonly [string, number] => e[1] !== undefined),
      ),
      control,
      encryption: new JobEncryption(this.options, this.queues),
      tracer: this.tracer ?? undefined,
      eventsChannel: () => this.fleetListeners.channel(),
    };
    return new Worker(this.db, this.tasks, this.events, config, this.processRunner);
  }

  async beforeApplicationShutdown(): Promise<void> {
    if (!this.worker) return;
    const worker = this.worker;
    this.worker = undefined;
    await worker.stop(this.options.worker?.shutdownTimeoutMs ?? 10_000);
    this.cancelPoller?.stop();
    await this.unlisten?.();
    await this.registration?.deregister();
  }

  async onApplicationShutdown(): Promise<void> {
    this.events.complete();
    await this.db.close();
  }

  /**
   * Runs every due job, one at a time, until none is left, and says what
   * happened: for tests, in the manner of Oban's drain_queue.
   */
  async drain(options: DrainOptions = {}): Promise<DrainResult> {
    const queues = options.queue ? [options.queue] : this.workedQueues();
    const result: DrainResult = { completed: 0, retrying: 0, discarded: 0, cancelled: 0, lost: 0, released: 0, jobs: [] };
    if (!queues.length) return result;
    const registration = await WorkerRegistration.register(this.db, queues, { drain: true });
    if (!this.worker) await this.fleetListeners.refresh();
    const worker = this.createWorker(registration.workerId, queues);
    const maxJobs = options.maxJobs ?? 10_000;
    // Far enough ahead for any backoff or runAt, near enough to stay a timestamp.
    // With a clock (a TestClock), "due" is as of the clock once it has been
    // moved ahead: a test moves it past a backoff or a runAt instead of
    // sleeping. A clock behind real time never hides jobs that are due.
    const clockNow = this.options.clock?.now().getTime();
    const now = options.withScheduled
      ? new Date(Date.now() + 100 * 365 * 86_400_000)
      : clockNow !== undefined && clockNow > Date.now()
        ? new Date(clockNow)
        : null;
    try {
      let claimed = true;
      while (claimed && result.jobs.length < maxJobs) {
        claimed = false;
        for (const queue of queues) {
          const [job] = await worker.claim(queue, 1, now);
          if (!job) continue;
          claimed = true;
          result.jobs.push(job);
          const outcome: RunOutcome = await worker.execute(job);
          result[outcome]++;
        }
      }
    } finally {
      await worker.stop(0);
      await registration.deregister();
    }
    return result;
  }
}
