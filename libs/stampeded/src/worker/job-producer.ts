import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import type { Job } from '../interfaces/job.interface.js';
import type { ControlGate } from '../control/control.gate.js';
import { CLAIM_BATCH } from '../sql/jobs.sql.js';
import { CLAIM_FAIR, CLAIM_LIMITED } from '../sql/control.sql.js';
import { OLDEST_SNAPSHOT, UNKNOWN_CLAIMS } from '../sql/workers.sql.js';
import { CLAIM_CURSOR_HELD, CLAIM_CURSOR_OFF, CLAIM_CURSOR_ON } from '../stampeded.messages.js';
import { toClaimedJob } from '../queue/job.mapper.js';
import { AutoPrefetch } from './auto-prefetch.js';
import { ClaimBuffer } from './claim-buffer.js';
import { ClaimCursor } from './claim-cursor.js';
import { isConnectionError, type OutcomeRecorder } from './outcome-recorder.js';
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
  readonly runningCount: number;
  runningIn(queue: string): number;
  isRunning(jobId: string): boolean;
  execute(job: Job, claimedAt?: number, countedAt?: number): Promise<RunOutcome>;
  giveBack(job: Job): Promise<RunOutcome>;
}

/** Claim statements one worker runs at once. */
const MAX_PARALLEL_CLAIMS = 2;
/** A snapshot held this long when claims turn slow is named in a warning. */
const HELD_SNAPSHOT_WARN_S = 5;
/** At most one such warning per queue in this long. */
const SLOW_CLAIMS_WARN_EVERY_MS = 60_000;

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
  /** Claim statements awaiting their answer. */
  private claimsInFlight = 0;
  /** A claim failed on its connection: it may have committed jobs that never reached us. */
  private unknownClaimsPossible = false;
  /** The latest claim time (database clock, ms) of any job a claim handed us. */
  private lastClaimAt = 0;
  private readonly emptyQueues = new Set<string>();
  /** Queues whose last claim brought nothing (claimMore()). */
  private readonly dryQueues = new Set<string>();
  /** Where each queue's next claim starts (NOTES.md, "The claim cursor"). */
  private readonly cursors = new Map<string, ClaimCursor>();
  /** When this process last warned of a queue's slow claims (reportSlowClaims()). */
  private readonly slowClaimsWarnedAt = new Map<string, number>();
  /** Queues warned of, whose return to full claims is logged too. */
  private readonly slowClaimsWarned = new Set<string>();
  /** Full claims running beside the cursor claims, by queue (sweep()). */
  private readonly sweeps = new Map<string, Promise<void>>();
  private readonly autoPrefetch: AutoPrefetch;
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
  /** Per rate-limited queue: a claim when its full window frees a start. */
  private readonly heldTimers = new Map<string, NodeJS.Timeout>();
  private claimFailures = 0;

  constructor(
    private readonly db: StampededDatabase,
    private readonly recorder: OutcomeRecorder,
    private readonly runner: JobRunner,
    private readonly config: ProducerConfig,
  ) {
    this.autoPrefetch = new AutoPrefetch(config.concurrency);
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
    for (const timer of this.heldTimers.values()) clearTimeout(timer);
    this.heldTimers.clear();
    await this.fetching;
    await Promise.all(this.sweeps.values());
    await Promise.all(this.buffer.takeAll().map((job) => this.runner.giveBack(job)));
  }

  private room(): number {
    return this.config.concurrency + this.prefetch() - this.runner.runningCount - this.startableBuffered();
  }

  /**
   * Buffered jobs that may start now. While tenants compete, a job over its
   * tenant's share waits in the buffer for that tenant's running jobs, and
   * takes no room: a flood's buffered jobs would otherwise fill the room
   * that the fair claim needs for a tenant that just arrived, and the
   * arrival would wait for the flood's buffer to drain one share at a time.
   */
  private startableBuffered(): number {
    if (!this.startable || !this.config.control?.tenantClaim(this.prefetch())) return this.buffer.length;
    return this.buffer.count(this.startable);
  }

  /** Jobs to hold claimed ahead of free slots. */
  private prefetch(): number {
    return this.config.prefetch === 'auto' ? this.autoPrefetch.size() : this.config.prefetch;
  }

  private queueRoom(queue: string): number {
    const cap = this.config.queueConcurrency.get(queue);
    const control = this.config.control;
    // A paused queue has no room.
    let room = control ? control.room(queue) : Infinity;
    // A limited queue's claimed jobs count against its cap and windows from
    // the claim: it takes only what can start now, not the prefetch.
    if (control?.limited(queue)) room = Math.min(room, this.config.concurrency - this.runner.runningCount - this.buffer.length);
    if (cap === undefined) return room;
    return Math.min(room, cap - this.inFlight(queue));
  }

  private inFlight(queue: string): number {
    return this.runner.runningIn(queue) + this.buffer.countIn(queue);
  }

  private async fetchLoop(): Promise<void> {
    try {
      if (this.unknownClaimsPossible) await this.releaseUnknownClaims();
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
            const capped = this.isCapped(queue);
            if (claims.length > 0 && capped) break; // a per-queue cap is counted one claim at a time
            // At a trickle a second claim only races the first for the same few jobs.
            if (claims.length > 0 && this.prefetch() < this.config.claimBatchSize) break;
            const limit = Math.min(this.room() - reserved, this.queueRoom(queue), this.config.claimBatchSize);
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

  /**
   * A claim whose answer was lost with its connection (a restarted server, a
   * cut connection) may have committed all the same: its jobs are ours in
   * the database and unknown here, and would sit 'executing' until their
   * expire_seconds (an hour by default); the fault suite's PostgreSQL
   * restart checks it (test/reliability/chaos.e2e-spec.ts). Once the
   * database answers and no claim is in flight, they are given back without
   * spending an attempt. Only jobs claimed after the last one a claim handed
   * us: a job we did receive, whose outcome may still be on its way, is
   * never among them.
   */
  private async releaseUnknownClaims(): Promise<void> {
    if (this.claimsInFlight > 0) return;
    const rows = await this.db.query<{ id: string; queue: string; attempt: number }>(UNKNOWN_CLAIMS, [
      this.config.workerId,
      new Date(this.lastClaimAt).toISOString(),
    ]);
    this.unknownClaimsPossible = false;
    const buffered = new Set(this.buffer.ids());
    const unknown = rows.filter((r) => !this.runner.isRunning(r.id) && !buffered.has(r.id));
    if (!unknown.length) return;
    this.logger.warn(`giving back ${unknown.length} job(s) claimed by a statement whose answer was lost with its connection`);
    await Promise.all(unknown.map((r) => this.recorder.release({ id: r.id, queue: r.queue, attempt: r.attempt } as Job)));
  }

  /** Claims up to `limit` jobs of one queue into the buffer and starts what fits. */
  private async claimInto(queue: string, limit: number): Promise<void> {
    const fair = this.config.control?.limited(queue) ? undefined : this.config.control?.tenantClaim(this.prefetch());
    const jobs = await this.claim(queue, limit);
    // A fair claim takes at most perTenant jobs of each tenant it names: one
    // that took that many left no tenant short, and the queue is claimed
    // again while tenants have room here, not at the next wake.
    const most = fair ? Math.min(limit, fair.tenants.length * fair.perTenant) : limit;
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
    if (this.room() - reserved <= 0) return undefined;
    const queues = this.config.queues;
    // A queue whose head waited past max_wait_secs is claimed from first, until it runs dry.
    const rushed = this.config.control?.rushed(queues).find((q) => !this.emptyQueues.has(q) && this.queueRoom(q) > 0);
    if (rushed !== undefined) return rushed;
    for (let i = 0; i < queues.length; i++) {
      const queue = queues[(this.nextQueue + i) % queues.length];
      if (this.emptyQueues.has(queue) || this.queueRoom(queue) <= 0) continue;
      this.nextQueue = (this.nextQueue + i + 1) % queues.length;
      return queue;
    }
    return undefined;
  }

  private isCapped(queue: string): boolean {
    return this.config.queueConcurrency.has(queue) || this.config.control?.counted(queue) === true;
  }

  private cursorOf(queue: string): ClaimCursor {
    let cursor = this.cursors.get(queue);
    if (!cursor) this.cursors.set(queue, (cursor = new ClaimCursor()));
    return cursor;
  }

  /**
   * The full claim that cursor mode still makes (ClaimCursor), run beside the
   * claims from the cursor rather than in their place: it walks every dead
   * entry a held snapshot keeps at the head of the claim index, and jobs due
   * meanwhile are taken from the cursor instead of waiting for that walk.
   * Its jobs join the buffer as a claim's do. Not for a capped queue, whose
   * claims are counted one at a time.
   */
  private sweep(queue: string, cursor: ClaimCursor): void {
    if (this.sweeps.has(queue)) return;
    cursor.fullStarted();
    const limit = Math.max(1, Math.min(this.config.claimBatchSize, this.room()));
    const run = (async () => {
      try {
        const jobs = await this.claim(queue, limit, null, true);
        if (this.stopping) {
          await Promise.all(jobs.map((job) => this.runner.giveBack(job)));
          return;
        }
        this.buffer.add(queue, jobs);
        this.startBuffered();
      } catch (err) {
        // The claims from the cursor go on; the next full claim is due as usual.
        this.logger.debug(`a full claim of ${queue} failed: ${(err as Error)?.message ?? err}`);
      } finally {
        this.sweeps.delete(queue);
      }
    })();
    this.sweeps.set(queue, run);
  }

  /**
   * Claims up to `limit` due jobs of the queue for this worker; `now`, when
   * given, is the clock they are due by; `full` claims from the head of the
   * queue whatever the cursor says.
   */
  async claim(queue: string, limit: number, now: Date | null = null, full = false): Promise<Job[]> {
    if (limit <= 0) return [];
    const workerId = this.config.workerId;
    // Before the statement is sent: the deadline errs early, never late.
    const sentAt = Date.now();
    const sentMono = performance.now();
    // While tenants compete: a few jobs of each tenant with room here.
    const fair = this.config.control?.tenantClaim(this.prefetch());
    // A capped or rate-limited queue is claimed by the limited claim.
    const limited = this.config.control?.limited(queue) === true;
    // A claim on the database's clock may start from where the last ones
    // ended (ClaimCursor); one on a test clock, a fair or a limited one, reads it all.
    const cursor = fair || limited || now !== null ? undefined : this.cursorOf(queue);
    let after = full ? null : (cursor?.next() ?? null);
    if (cursor && !full && after === null && cursor.current() !== null && this.started && !this.isCapped(queue)) {
      this.sweep(queue, cursor);
      after = cursor.current();
    }
    let rows;
    this.claimsInFlight++;
    try {
      if (limited) {
        const rules = this.config.control!.rateRules(queue);
        rows = await this.db.query(CLAIM_LIMITED, [queue, workerId, limit, now, rules, fair?.tenants ?? null, fair?.perTenant ?? null]);
      } else if (fair) rows = await this.db.query(CLAIM_FAIR, [queue, workerId, limit, now, fair.tenants, fair.perTenant]);
      else rows = await this.db.query(CLAIM_BATCH, [queue, workerId, limit, now, after]);
    } catch (err) {
      if (isConnectionError(err)) this.unknownClaimsPossible = true;
      throw err;
    } finally {
      this.claimsInFlight--;
    }
    if (limited) {
      const held = rows.find((row) => row.id === null);
      if (held) {
        rows = rows.filter((row) => row.id !== null);
        this.claimWhenFreed(queue, Number(held.held_ms));
      }
    }
    const jobs = rows.map((row) => toClaimedJob(row, workerId));
    if (cursor) {
      let latestDue: number | null = null;
      for (const job of jobs) if (latestDue === null || job.scheduledAt.getTime() > latestDue) latestDue = job.scheduledAt.getTime();
      const at = performance.now();
      const wasOn = cursor.current() !== null;
      const tookMs = Date.now() - sentAt;
      cursor.record({ after, limit, taken: jobs.length, latestDue, tookMs, at });
      if (!wasOn && cursor.current() !== null) void this.reportSlowClaims(queue, tookMs, jobs.length);
      else if (wasOn && cursor.current() === null) this.reportFastClaims(queue);
    }
    for (const [i, job] of jobs.entries()) {
      this.claimedLocally.set(job, sentAt);
      // The statement began after it was sent; a limited claim says how long after that it counted (CLAIM_LIMITED).
      this.claimCounted.set(job, sentMono + (now === null ? Math.max(0, Number(rows[i].counted_after_ms ?? 0)) : 0));
      const claimedAt = job.claimedAt ? job.claimedAt.getTime() : 0;
      if (claimedAt > this.lastClaimAt) this.lastClaimAt = claimedAt;
    }
    this.config.control?.claimed(jobs);
    return jobs;
  }

  /**
   * Claims turned to the cursor. A snapshot held open for a while is worth
   * an operator's warning, naming its session; slow claims without one (a
   * busy machine) are not, and are only a debug line.
   */
  private async reportSlowClaims(queue: string, tookMs: number, taken: number): Promise<void> {
    const last = this.slowClaimsWarnedAt.get(queue);
    if (last !== undefined && performance.now() - last < SLOW_CLAIMS_WARN_EVERY_MS) return;
    try {
      const [holder] = await this.db.query<{ pid: number; application: string; state: string; seconds: number }>(OLDEST_SNAPSHOT);
      if (holder && holder.seconds >= HELD_SNAPSHOT_WARN_S) {
        this.slowClaimsWarnedAt.set(queue, performance.now());
        this.slowClaimsWarned.add(queue);
        this.logger.warn(CLAIM_CURSOR_HELD(queue, tookMs, taken, holder));
        return;
      }
    } catch (err) {
      this.logger.debug(`could not read pg_stat_activity: ${(err as Error)?.message ?? err}`);
    }
    this.logger.debug(CLAIM_CURSOR_ON(queue, tookMs, taken));
  }

  /** Claims left the cursor: said where the turn to it was. */
  private reportFastClaims(queue: string): void {
    if (this.slowClaimsWarned.delete(queue)) this.logger.log(CLAIM_CURSOR_OFF(queue));
    else this.logger.debug(CLAIM_CURSOR_OFF(queue));
  }

  /** A full rate-limit window frees a start after `ms`: claim the queue again then, not at the next poll. */
  private claimWhenFreed(queue: string, ms: number): void {
    if (!this.started || this.stopping || this.heldTimers.has(queue)) return;
    const delay = Math.max(1, Math.min(ms, this.config.pollIntervalMs));
    const timer = setTimeout(() => {
      this.heldTimers.delete(queue);
      this.wake(queue);
    }, delay);
    timer.unref?.();
    this.heldTimers.set(queue, timer);
  }

  private startBuffered(): void {
    // While tenants compete, each in its turn (ControlGate.startRank); otherwise in claim order.
    const control = this.config.control;
    const rank = control?.tenantClaim(this.prefetch()) ? (job: Job) => control.startRank(job) : undefined;
    while (this.runner.runningCount < this.config.concurrency && this.buffer.length && !this.stopping) {
      const job = this.buffer.takeFirst(this.startable, rank);
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

/**
 * The unique index on a key's running job (stampeded_jobs_ordering_running_idx,
 * migration 11) refused a claim: another claim took a job of the same key at
 * the same instant. Named by its columns, as each partition's copy of the
 * index has a name of its own.
 */
function isOrderingRace(err: unknown): boolean {
  const { code, detail } = (err ?? {}) as { code?: string; detail?: string };
  return code === '23505' && typeof detail === 'string' && detail.startsWith('Key (queue, ordering_key)=');
}
