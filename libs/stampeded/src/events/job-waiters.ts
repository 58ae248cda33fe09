import { Logger } from '@nestjs/common';
import { filter, type Subscription } from 'rxjs';
import type { StampededDatabase } from '../database/stampeded-database.js';
import { POLL_ONLY_INTERVAL_MS } from '../stampeded.constants.js';
import type { JobEvents } from './job-events.js';
import { FINISHED_OR_GONE, GET_JOB } from '../sql/jobs.sql.js';
import { toJob } from '../queue/job.mapper.js';
import type { JobEncryption } from '../encryption/job-encryption.js';
import { InvalidJobError, JobWaitError } from '../errors/stampeded.errors.js';
import { JOB_NOT_FOUND, WAITED_JOB_GONE, WAIT_ENDED_BY_SHUTDOWN, WAIT_TIMED_OUT } from '../stampeded.messages.js';
import { FINISHED_STATES, type Job, type JobState } from '../interfaces/job.interface.js';
import type { JobEventType } from '../interfaces/job-event.interface.js';

/** The events after which a waited job may be finished: read it then. */
const FINISHING_EVENTS: ReadonlySet<JobEventType> = new Set<JobEventType>(['completed', 'discarded', 'cancelled']);

/**
 * How often the jobs still waited for are read, all in one statement, for
 * what no event said: a notification missed while the listening connection
 * was down, a worker that sends none (events: 'local', or before it learned
 * that someone listens), a job ended by the maintenance leader, the
 * dashboard or the CLI.
 */
export const WAIT_RECHECK_MS = 3000;

export interface WaitRequest {
  id: string;
  /** Only in this queue. */
  queue?: string;
  /** Only a job of this task (a typed wait); another task's job is not found. */
  task?: string;
  timeoutMs?: number;
  signal?: AbortSignal;
}

interface Waiter {
  readonly id: string;
  /** Known once the job was first read: the re-check finds it by its primary key. */
  queue?: string;
  state?: JobState;
  resolve(job: Job): void;
  reject(err: unknown): void;
}

/**
 * The waits for jobs to finish of one app: one subscription to its job
 * events (its own workers' and, with events: 'fleet', every process's, heard
 * on the app's one LISTEN connection) and one timer, however many wait. An
 * event that may finish a waited job makes it read, with every other job such
 * events named meanwhile, in one statement; every WAIT_RECHECK_MS, and when
 * the listening connection comes back, every job still waited for is read in
 * one statement too.
 */
export class JobWaiters {
  private readonly logger = new Logger('Stampeded');
  private readonly waiting = new Map<string, Set<Waiter>>();
  private subscriptions: Subscription[] = [];
  private recheckTimer?: NodeJS.Timeout;
  /** Jobs an event named, to read together at the next turn of the event loop. */
  private readonly toRead = new Set<string>();
  private readScheduled = false;
  /** Jobs an event named before their first read told their queue. */
  private readonly heardEarly = new Set<string>();
  private stopped = false;
  /**
   * How often the jobs still waited for are read (see WAIT_RECHECK_MS). An
   * app that cannot LISTEN hears no other process's events: the read is how
   * it learns, at the worker's poll-only interval.
   */
  recheckEveryMs: number;

  constructor(
    private readonly db: StampededDatabase,
    private readonly events: JobEvents,
    private readonly encryption: JobEncryption,
  ) {
    this.recheckEveryMs = db.canListen ? WAIT_RECHECK_MS : POLL_ONLY_INTERVAL_MS;
  }

  /** How many waits are pending. */
  get pending(): number {
    let n = 0;
    for (const set of this.waiting.values()) n += set.size;
    return n;
  }

  /** Resolves with the job once it is finished (completed, discarded or cancelled); see QueueService.waitFor. */
  async wait(request: WaitRequest): Promise<Job> {
    const { id, signal, timeoutMs } = request;
    if (this.stopped) throw new JobWaitError(id, 'shutdown', WAIT_ENDED_BY_SHUTDOWN(id));
    signal?.throwIfAborted();
    // Listening before the first read: a job that finishes after the read is
    // heard, and one that finished before it is found by it.
    this.watch();
    await this.events.listenToFleet();
    if (this.stopped || signal?.aborted) {
      if (!this.waiting.size) this.unwatch();
      if (signal?.aborted) throw signal.reason;
      throw new JobWaitError(id, 'shutdown', WAIT_ENDED_BY_SHUTDOWN(id));
    }

    return new Promise<Job>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const onAbort = () => settle(() => reject(signal!.reason));
      const settle = (then: () => void) => {
        if (!this.remove(waiter)) return;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        then();
      };
      const waiter: Waiter = {
        id,
        resolve: (job) => settle(() => resolve(job)),
        reject: (err) => settle(() => reject(err)),
      };
      this.add(waiter);
      const firstRead = this.firstRead(waiter, request).catch((err: unknown) => waiter.reject(err));
      if (timeoutMs !== undefined) {
        // Not before the first read has answered: a job finished already is returned, whatever the timeout.
        const timedOut = () => waiter.reject(new JobWaitError(id, 'timed_out', WAIT_TIMED_OUT(id, timeoutMs, waiter.state)));
        timer = setTimeout(() => void firstRead.then(timedOut, timedOut), timeoutMs);
      }
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  private async firstRead(waiter: Waiter, request: WaitRequest): Promise<void> {
    const [row] = await this.db.query(GET_JOB, [request.id, request.queue ?? null]);
    if (!row || (request.task !== undefined && row.task !== request.task)) {
      waiter.reject(new InvalidJobError(JOB_NOT_FOUND(request.id)));
      return;
    }
    if (FINISHED_STATES.has(row.state)) {
      waiter.resolve(this.encryption.openForReading(toJob(row)));
      return;
    }
    waiter.queue = row.queue;
    waiter.state = row.state;
    // An event named it while this read was under way, and may be newer than what it read.
    if (this.heardEarly.delete(waiter.id)) this.readSoon(waiter.id);
  }

  private add(waiter: Waiter): void {
    let set = this.waiting.get(waiter.id);
    if (!set) this.waiting.set(waiter.id, (set = new Set()));
    set.add(waiter);
    if (!this.recheckTimer) this.recheckTimer = setInterval(() => void this.recheck(), this.recheckEveryMs);
  }

  /** False if it was no longer waiting. */
  private remove(waiter: Waiter): boolean {
    const set = this.waiting.get(waiter.id);
    if (!set?.delete(waiter)) return false;
    if (set.size === 0) {
      this.waiting.delete(waiter.id);
      this.heardEarly.delete(waiter.id);
    }
    if (this.waiting.size === 0) this.unwatch();
    return true;
  }

  /** Hears the app's job events, while anyone waits. */
  private watch(): void {
    if (this.subscriptions.length) return;
    this.subscriptions = [
      this.events.events$.pipe(filter((e) => FINISHING_EVENTS.has(e.type) && this.waiting.has(e.jobId))).subscribe((e) => this.readSoon(e.jobId)),
      this.events.reconnected$.subscribe(() => void this.recheck()),
    ];
  }

  private unwatch(): void {
    for (const s of this.subscriptions) s.unsubscribe();
    this.subscriptions = [];
    clearInterval(this.recheckTimer);
    this.recheckTimer = undefined;
  }

  private readSoon(id: string): void {
    this.toRead.add(id);
    if (this.readScheduled) return;
    this.readScheduled = true;
    setImmediate(() => {
      this.readScheduled = false;
      const ids = [...this.toRead];
      this.toRead.clear();
      void this.read(ids, true);
    });
  }

  /** Reads every job still waited for (whose queue is known: the others' first read is under way). */
  async recheck(): Promise<void> {
    await this.read([...this.waiting.keys()]);
  }

  private async read(ids: string[], heard = false): Promise<void> {
    const known = ids.flatMap((id) => {
      const waiters = this.waiting.get(id);
      const queue = [...(waiters ?? [])].find((w) => w.queue !== undefined)?.queue;
      if (queue === undefined && waiters && heard) this.heardEarly.add(id);
      return queue === undefined ? [] : [{ id, queue }];
    });
    if (!known.length) return;
    let rows: Record<string, any>[];
    try {
      rows = await this.db.query(FINISHED_OR_GONE, [known.map((k) => k.queue), known.map((k) => k.id)]);
    } catch (err) {
      // The next re-check tries again; a timeout or an abort still ends the wait.
      this.logger.warn(`could not read ${known.length} waited-for job(s): ${(err as Error).message}; reading again in ${this.recheckEveryMs} ms`);
      return;
    }
    for (const row of rows) {
      const waiters = [...(this.waiting.get(row.waited_id) ?? [])];
      if (row.id === null) {
        for (const w of waiters) w.reject(new JobWaitError(row.waited_id, 'removed', WAITED_JOB_GONE(row.waited_id)));
        continue;
      }
      const { waited_id: _, ...stored } = row;
      let job: Job;
      try {
        job = this.encryption.openForReading(toJob(stored));
      } catch (err) {
        for (const w of waiters) w.reject(err);
        continue;
      }
      for (const w of waiters) w.resolve(job);
    }
  }

  /** Ends the waits still pending: the app is closing, and will hear no more. */
  shutdown(): void {
    this.stopped = true;
    for (const set of [...this.waiting.values()]) {
      for (const w of [...set]) w.reject(new JobWaitError(w.id, 'shutdown', WAIT_ENDED_BY_SHUTDOWN(w.id)));
    }
    this.unwatch();
  }
}
