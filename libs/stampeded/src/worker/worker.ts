import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import type { TaskRegistry } from '../explorer/task.registry.js';
import type { JobEvents } from '../events/job-events.js';
import type { Job } from '../interfaces/job.interface.js';
import type { ProcessTaskRunner } from '../isolation/process-task.runner.js';
import { JobExecutor, type ExecutorConfig, type RunOutcome } from './job-executor.js';
import { JobProducer, type ProducerConfig } from './job-producer.js';
import { OutcomeRecorder } from './outcome-recorder.js';
import { WorkerEvents } from './worker-events.js';

export type { RunOutcome } from './job-executor.js';

export interface WorkerConfig extends ProducerConfig, ExecutorConfig {
  completionBatchSize: number;
}

/**
 * One worker: a JobProducer that claims jobs and hands them over as slots
 * free up, a JobExecutor that runs each to its outcome, and the
 * OutcomeRecorder both write through. It owns what concerns them together:
 * starting, stopping, a cancelled job, and the loss of its heartbeat.
 */
export class Worker {
  private readonly logger = new Logger('Stampeded');
  private readonly recorder: OutcomeRecorder;
  private readonly events: WorkerEvents;
  private readonly executor: JobExecutor;
  private readonly producer: JobProducer;

  constructor(
    db: StampededDatabase,
    tasks: TaskRegistry,
    events: JobEvents,
    private readonly config: WorkerConfig,
    processRunner?: ProcessTaskRunner,
  ) {
    this.recorder = new OutcomeRecorder(db, config.workerId, config.completionBatchSize, config.eventsChannel);
    this.events = new WorkerEvents(events, config.workerId, config.tracer);
    this.executor = new JobExecutor(db, tasks, this.recorder, this.events, config, () => this.producer.slotFreed(), processRunner);
    this.producer = new JobProducer(db, this.recorder, this.executor, config);
    // The next job of a key waits for this one's outcome: claim it then, not at the next poll.
    this.executor.onLineMoved((queue) => this.producer.wake(queue));
  }

  get workerId(): string {
    return this.config.workerId;
  }

  get runningCount(): number {
    return this.executor.runningCount;
  }

  start(): void {
    this.producer.start();
  }

  /** A job may be waiting: in this queue, or (no queue) anywhere. */
  wake(queue?: string): void {
    this.producer.wake(queue);
  }

  /** Claims up to `limit` due jobs of the queue without starting them: for drain(), which runs them one at a time. */
  async claim(queue: string, limit: number, now: Date | null = null): Promise<Job[]> {
    return (await this.producer.claim(queue, limit, now)).jobs;
  }

  /** Runs one claimed job to its recorded outcome; a chunked task's job runs at once, as a chunk of one. */
  execute(job: Job): Promise<RunOutcome> {
    const outcome = this.executor.execute(job, this.producer.claimedAt(job));
    this.executor.startChunks();
    return outcome;
  }

  /** The jobs this worker holds, running or claimed ahead: those a cancel can concern. */
  heldJobs(): Job[] {
    return [...this.executor.runningJobs(), ...this.producer.bufferedJobs()];
  }

  /** The job was cancelled (by anyone): stop it if it runs here, drop it if it waits here; the database already says cancelled. */
  cancelled(jobId: string): void {
    if (this.executor.cancel(jobId)) return;
    const job = this.producer.takeBufferedJob(jobId);
    if (job) this.events.emit('cancelled', job);
  }

  /**
   * This worker could not prove it is alive for long enough that the reaper
   * may give its jobs to another worker, or its row is already gone. Stop
   * them here first -- two executions of one job at once is worse than an
   * interrupted one -- and record `heartbeat_lost` for those still ours (an
   * interruption: the attempt budget is not the job's to lose for it).
   * Unstarted jobs go back as if never claimed.
   */
  async heartbeatLost(message: string): Promise<void> {
    const buffered = this.producer.takeBuffered();
    const running = this.executor.runningCount;
    if (running || buffered.length) {
      this.logger.warn(`${message}: stopping ${running} running job(s) and giving back ${buffered.length} unstarted`);
    }
    await Promise.all([this.executor.interruptAll(message), ...buffered.map((job) => this.executor.giveBack(job))]);
  }

  /**
   * Stops claiming, gives back what was claimed but not started, lets running
   * handlers finish for up to `timeoutMs`, then aborts the rest and gives them
   * back too -- interrupted by us, not failed -- so nothing waits for the reaper.
   */
  async stop(timeoutMs: number, abortGraceMs = 2000): Promise<void> {
    await this.producer.stop();
    await this.executor.finishRunning(timeoutMs, abortGraceMs);
    await this.recorder.settle();
  }
}
