import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import type { Job } from '../interfaces/job.interface.js';
import type { ControlGate } from '../control/control.gate.js';
import { AutoPrefetch } from './auto-prefetch.js';
import { ClaimBuffer } from './claim-buffer.js';
import { ClaimRoom } from './claim-room.js';
import { Claimers, isOrderingRace, type ClaimAnswer } from './claimers.js';
import { LostClaims } from './lost-claims.js';
import { isConnectionError, type OutcomeRecorder } from './outcome-recorder.js';
import { SlowClaims } from './slow-claims.js';
import type { RunOutcome } from './job-executor.js';

export interface ProducerConfig {
  workerId: string;
  queues: string[];
  concurrency: number;
  /** Jobs claimed ahead of free slots; `'auto'` sizes it from the measured rate (AutoPrefetch). */
  prefetch: number | 'auto';
  claimBatchSize: number;
  pollIntervalMs: number;
  /** Per-queue caps from registerQueue({ concurrency }). */
  queueConcurrency: Map<string, number>;
  /** Queue control (control/): where to claim, how much, and which buffered job may start. */
  control?: ControlGate;
}

/** What the producer needs of whoever runs the jobs it claims (JobExecutor). */
export interface JobRunner {
  /** The slots in use: a job running alone takes one, and so does a chunk, filling or running. */
  readonly runningCount: number;
  /** How chunked tasks' jobs take slots; undefined when the worker has no chunked task. */
  readonly chunks?: ChunkRoom;
  /** The jobs of the queue running here, those in chunks too: what a queue's cap counts. */
  runningIn(queue: string): number;
  isRunning(jobId: string): boolean;
  /** The attempt of the job with this id running here, if one is. */
  attemptOf(jobId: string): number | undefined;
  runningJobs(): Job[];
  /** Stops a running job whose claim the database no longer has. */
  disown(job: Job): void;
  execute(job: Job, claimedAt?: number, countedAt?: number): Promise<RunOutcome>;
  giveBack(job: Job): Promise<RunOutcome>;
}

/**
 * A chunk takes one slot for all its jobs (Chunks): a free slot takes a
 * chunk's worth of a queue whose tasks are all chunked, and a filling chunk
 * takes its task's jobs with no slot of its own.
 */
export interface ChunkRoom {
  /** The jobs one free slot takes from the queue. */
  perSlot(queue: string): number;
  /** The room left in the queue's filling chunks. */
  spare(queue: string): number;
  /** Whether the job would join a filling chunk, taking no slot. */
  joins(job: Job): boolean;
  readonly fillingCount: number;
}

/** Claim statements one worker runs at once. */
const MAX_PARALLEL_CLAIMS = 2;

/**
 * Keeps a worker supplied with jobs: claims them in batches into a small
 * local buffer, each queue's in claim order, and starts them as slots free
 * up. Claiming ahead by `prefetch` jobs means a finished handler starts the
 * next job without a round trip; 'auto' claims ahead only while slots free
 * up fast (AutoPrefetch). It wakes on a notification, on a poll timer, and
 * when the buffer runs low, and backs off while the database is unreachable.
 */
export class JobProducer {
  private readonly logger = new Logger('Stampeded');
  private readonly buffer = new ClaimBuffer();
  /**
   * When each buffered job was claimed, by this process's clock. A job's
   * deadline counts from its claim, and the database's heartbeat_at says when
   * in the database's time: compared with Date.now() here, a host whose
   * clock runs ahead by more than expire_seconds would time out every job
   * the moment it started (and a smaller skew shorten every timeout by that
   * much), and the job would run again while its first run went on. The
   * fault suite's skewed clocks check it (test/reliability/chaos.e2e-spec.ts).
   */
  private readonly claimedLocally = new WeakMap<Job, number>();
  /**
   * By performance.now(), a time no later than the claim of each buffered job
   * counted it in its rate limits' windows: its start grace counts from it (StartGrace).
   */
  private readonly claimCounted = new WeakMap<Job, number>();
  /** Which claim each queue's claims go through (plain, fair, limited). */
  private readonly claimers: Claimers;
  private readonly lostClaims: LostClaims;
  private readonly slowClaims: SlowClaims;
  private readonly emptyQueues = new Set<string>();
  /** Queues whose last claim brought nothing (claimMore()). */
  private readonly dryQueues = new Set<string>();
  private readonly autoPrefetch: AutoPrefetch;
  private readonly room: ClaimRoom;
  /** Which buffered job may start now; undefined: the first. */
  private readonly startable?: (job: Job) => boolean;
  private nextQueue = 0;
  private fetching?: Promise<void>;
  private wakeRequested = false;
  private stopping = false;
  /** Only a started producer claims on its own; drain() claims through a producer that never starts. */
  private started = false;
  private pollTimer?: NodeJS.Timeout;
  private retryTimer?: NodeJS.Timeout;
  private claimFailures = 0;

  constructor(
    db: StampededDatabase,
    recorder: OutcomeRecorder,
    private readonly runner: JobRunner,
    private readonly config: ProducerConfig,
  ) {
    this.autoPrefetch = new AutoPrefetch(config.concurrency);
    this.room = new ClaimRoom(
      config,
      runner,
      this.buffer,
      () => this.prefetch(),
      () => this.startableBuffered(),
    );
    this.claimers = new Claimers(db, config.workerId, config.queues, config.control, () => this.prefetch(), {
      wake: (queue) => this.wake(queue),
      pollIntervalMs: config.pollIntervalMs,
    });
    this.lostClaims = new LostClaims(db, recorder, config.workerId, this.logger);
    this.slowClaims = new SlowClaims(db, this.logger, (queue) => this.claimFull(queue));
    const gate = config.control;
    // A buffered job whose tenant is at its share waits here for one of that
    // tenant's running jobs to finish, and the next tenant's job goes first.
    // Started in claim order, it would be refused as `throttled` and sent
    // back with a delay, and under a steady load of many tenants half the
    // claimed jobs would go round that loop (docs/reliability.md, the soak).
    if (gate) this.startable = (job) => gate.withinShare(job);
    // A capped queue's slot is free once its job's outcome is written; a
    // queue's tenant shares change when a tenant arrives.
    gate?.onWake((queue) => this.wake(queue));
  }

  start(): void {
    this.started = true;
    this.pollTimer = setInterval(() => {
      this.emptyQueues.clear();
      this.wake();
    }, this.config.pollIntervalMs);
    this.wake();
  }

  /** A job may be waiting: in this queue, or (no queue) anywhere. */
  wake(queue?: string): void {
    if (this.stopping || !this.started) return;
    if (queue !== undefined) {
      if (!this.config.queues.includes(queue)) return;
      this.emptyQueues.delete(queue);
    } else {
      this.emptyQueues.clear();
    }
    this.fetch();
  }

  /**
   * Runs the claim loop, or has the one under way take another pass. A
   * request that comes after the loop's last pass, while its promise
   * settles, starts the loop again: a slot freed in that gap would otherwise
   * wait for the next poll.
   */
  private fetch(): void {
    if (this.fetching) {
      this.wakeRequested = true;
      return;
    }
    this.fetching = this.fetchLoop().finally(() => {
      this.fetching = undefined;
      if (this.wakeRequested && !this.stopping) this.fetch();
    });
  }

  /** A running job left its slot: start the next buffered one, and claim more when the buffer runs low. */
  slotFreed(): void {
    this.autoPrefetch.slotFreed();
    this.startBuffered();
  }

  /** When this process claimed the job (epoch ms), for its deadline. */
  claimedAt(job: Job): number | undefined {
    return this.claimedLocally.get(job);
  }

  /** The buffered jobs, left in place. */
  bufferedJobs(): readonly Job[] {
    return this.buffer.peek();
  }

  /** Every buffered job, taken out: they are the caller's to give back. */
  takeBuffered(): Job[] {
    return this.buffer.takeAll();
  }

  /** The buffered job with this id, taken out (it was cancelled). */
  takeBufferedJob(jobId: string): Job | undefined {
    return this.buffer.take(jobId);
  }

  /** Stops claiming and gives back what was claimed but not started. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearInterval(this.pollTimer);
    clearTimeout(this.retryTimer);
    this.claimers.stop();
    await this.fetching;
    await this.slowClaims.settle();
    await Promise.all(this.buffer.takeAll().map((job) => this.runner.giveBack(job)));
  }

  /**
   * Buffered jobs that may start now. While tenants compete, a job over its
   * tenant's share waits in the buffer for that tenant's running jobs, and
   * takes no room: a flood's buffered jobs would otherwise fill the room
   * that the fair claim needs for a tenant that just arrived, and the
   * arrival would wait for the flood's buffer to drain one share at a time.
   */
  private startableBuffered(): number {
    if (!this.startable || !this.claimers.tenantsCompete) return this.buffer.length;
    return this.buffer.count(this.startable);
  }

  /** Jobs to hold claimed ahead of free slots. */
  private prefetch(): number {
    return this.config.prefetch === 'auto' ? this.autoPrefetch.size() : this.config.prefetch;
  }

  private async fetchLoop(): Promise<void> {
    try {
      await this.lostClaims.giveBack(
        (id) => this.runner.isRunning(id) || this.buffer.has(id),
        this.runner.runningJobs(),
        (job) => this.runner.disown(job),
      );
      do {
        this.wakeRequested = false;
        while (!this.stopping) {
          // Up to MAX_PARALLEL_CLAIMS claims at once when the buffer wants more
          // than one claim can take: a batch of no-op jobs runs in a fraction
          // of the time its claim takes, so one claim at a time would leave
          // the worker idle most of the time (bench/RESULTS.md).
          const claims: Promise<void>[] = [];
          let reserved = 0;
          while (claims.length < MAX_PARALLEL_CLAIMS) {
            const queue = this.pickQueue(reserved);
            if (queue === undefined) break;
            const capped = this.room.capped(queue);
            if (claims.length > 0 && capped) break; // a per-queue cap is counted one claim at a time
            // At a trickle a second claim only races the first for the same few jobs.
            if (claims.length > 0 && this.prefetch() < this.config.claimBatchSize) break;
            const limit = Math.min(this.room.total(queue) - reserved, this.room.ofQueue(queue), this.config.claimBatchSize);
            if (limit <= 0) break;
            reserved += limit;
            claims.push(this.claimInto(queue, limit));
            if (capped) break;
          }
          if (!claims.length) break;
          await Promise.all(claims);
        }
      } while (this.wakeRequested && !this.stopping);
      this.claimFailures = 0;
    } catch (err) {
      // The retry below is the next pass, not the settling loop.
      this.wakeRequested = false;
      if (isOrderingRace(err)) {
        // Lost a race for a key to another claim (stampeded_claim_batch.sql):
        // nothing was claimed, and the next claim sees the winner's job running.
        clearTimeout(this.retryTimer);
        this.retryTimer = setTimeout(() => this.wake(), 0);
        return;
      }
      this.claimFailures++;
      const delay = Math.min(30_000, 200 * 2 ** Math.min(this.claimFailures, 8));
      if (this.claimFailures === 1 || this.claimFailures % 20 === 0) {
        const what = isConnectionError(err) ? 'the database is unreachable' : 'claiming failed';
        this.logger.warn(`${what} (${(err as Error)?.message ?? err}); trying again in ${delay} ms`);
      }
      clearTimeout(this.retryTimer);
      this.retryTimer = setTimeout(() => this.wake(), delay);
    }
  }

  /** Claims up to `limit` jobs of one queue into the buffer and starts what fits. */
  private async claimInto(queue: string, limit: number): Promise<void> {
    const { jobs, most } = await this.claim(queue, limit);
    // A claim that took the most it could is followed by another (a fair
    // claim, while tenants have room here), not by the next wake.
    if (jobs.length === 0 || jobs.length < most) this.emptyQueues.add(queue);
    if (jobs.length === 0) this.dryQueues.add(queue);
    else this.dryQueues.delete(queue);
    if (this.stopping) {
      // Claimed while shutdown began: give them straight back.
      await Promise.all(jobs.map((job) => this.runner.giveBack(job)));
      return;
    }
    this.buffer.add(queue, jobs);
    this.startBuffered();
  }

  /** Round robin over the queues that may have work and have room (beyond `reserved` jobs being claimed). */
  private pickQueue(reserved = 0): string | undefined {
    // Without chunks every queue's jobs take a slot each: one answer for all.
    const chunked = this.runner.chunks !== undefined;
    if (!chunked && this.room.total() - reserved <= 0) return undefined;
    const open = (q: string) => !this.emptyQueues.has(q) && this.room.ofQueue(q) > 0 && (!chunked || this.room.total(q) - reserved > 0);
    const queues = this.config.queues;
    // A queue whose head waited past max_wait_secs is claimed from first, until it runs dry.
    const rushed = this.config.control?.rushed(queues).find(open);
    if (rushed !== undefined) return rushed;
    for (let i = 0; i < queues.length; i++) {
      const queue = queues[(this.nextQueue + i) % queues.length];
      if (!open(queue)) continue;
      this.nextQueue = (this.nextQueue + i + 1) % queues.length;
      return queue;
    }
    return undefined;
  }

  /** The full claim cursor mode makes beside the claims from the cursor (SlowClaims.from): its jobs join the buffer as a claim's do. */
  private async claimFull(queue: string): Promise<void> {
    const { jobs } = await this.claim(queue, Math.max(1, Math.min(this.config.claimBatchSize, this.room.total(queue))), null, true);
    if (this.stopping) await Promise.all(jobs.map((job) => this.runner.giveBack(job)));
    else {
      this.buffer.add(queue, jobs);
      this.startBuffered();
    }
  }

  /**
   * Claims up to `limit` due jobs of the queue for this worker; `now`, when
   * given, is the clock they are due by; `full` claims from the head of the
   * queue whatever the cursor says.
   */
  async claim(queue: string, limit: number, now: Date | null = null, full = false): Promise<ClaimAnswer> {
    if (limit <= 0) return { jobs: [], most: 0 };
    // Before the statement is sent: the deadline errs early, never late.
    const sentAt = Date.now();
    const sentMono = performance.now();
    const claimer = this.claimers.of(queue);
    // A plain claim on the database's clock may start from where the last
    // ones ended (SlowClaims); one on a test clock reads it all.
    const cursored = claimer.cursored && now === null;
    const after = cursored && !full ? this.slowClaims.from(queue, this.started && !this.room.capped(queue)) : null;
    const claimed = await this.lostClaims.track(() => claimer.claim(queue, limit, now, after));
    const answer = this.lostClaims.withoutHeld(claimed, (id) => this.runner.attemptOf(id), this.buffer.peek());
    if (cursored) this.slowClaims.record(queue, { after, limit, jobs: answer.jobs, tookMs: Date.now() - sentAt });
    // The statement began after it was sent; a limited claim says how long after that it counted (CLAIM_LIMITED).
    const countedAt = sentMono + (now === null ? Math.max(0, answer.countedAfterMs ?? 0) : 0);
    for (const job of answer.jobs) {
      this.claimedLocally.set(job, sentAt);
      this.claimCounted.set(job, countedAt);
    }
    this.config.control?.claimed(answer.jobs);
    return answer;
  }

  private startBuffered(): void {
    // While tenants compete, each in its turn (ControlGate.startRank); otherwise in claim order.
    const control = this.config.control;
    const rank = control && this.claimers.tenantsCompete ? (job: Job) => control.startRank(job) : undefined;
    const chunks = this.runner.chunks;
    while (this.buffer.length && !this.stopping) {
      let startable = this.startable;
      if (this.runner.runningCount >= this.config.concurrency) {
        // No slot free: only a job that joins a filling chunk can start.
        if (!chunks?.fillingCount) break;
        const gate = this.startable;
        startable = (job) => chunks.joins(job) && (!gate || gate(job));
      }
      const job = this.buffer.takeFirst(startable, rank);
      if (!job) break;
      void this.runner.execute(job, this.claimedLocally.get(job), this.claimCounted.get(job));
    }
    // Below half the buffer, claim more before the last buffered job starts:
    // at once, or in another pass of the claim loop under way.
    if (this.stopping || this.startableBuffered() > this.prefetch() / 2) return;
    // While tenants compete, the claim for the buffer's next jobs goes to
    // the queues known to have work; the ones found empty wait for a
    // notification or the poll. Probing every empty queue first, a round
    // trip each, kept a worker's slots idle between its fair claims
    // (bench/RESULTS.md, "Tenant fairness").
    if (rank) this.claimMore();
    else if (this.fetching) this.wakeRequested = true;
    else this.wake();
  }

  /** Claims again from the queues whose last claim brought jobs. */
  private claimMore(): void {
    if (this.stopping || !this.started) return;
    for (const queue of this.emptyQueues) if (!this.dryQueues.has(queue)) this.emptyQueues.delete(queue);
    this.fetch();
  }
}
