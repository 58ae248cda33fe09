import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import {
  CANCEL_CLAIMED,
  CANCEL_CLAIMED_NOTIFY,
  COMPLETE_MANY,
  COMPLETE_MANY_NOTIFY,
  FAIL,
  FAIL_MANY,
  FAIL_MANY_NOTIFY,
  FAIL_NOTIFY,
  ORDERING_TO_BACK,
  RELEASE,
} from '../sql/jobs.sql.js';
import { arrayElement } from '../sql/statement.js';
import { UuidV7Source } from '../queue/uuidv7.js';
import type { FailureKind, Job, JobState } from '../interfaces/job.interface.js';

export interface FailureRecord {
  kind: FailureKind;
  error: string;
  retryDelayMs: number | null;
  exitStatus?: number | null;
}

export interface FailureResult {
  /** False when the job was no longer ours: nothing was recorded. */
  owned: boolean;
  state?: JobState;
  deadLettered?: boolean;
}

interface PendingCompletion {
  job: Job;
  /** The result to store, as JSON text (see resultText); null for none. */
  result: string | null;
  resolve(owned: boolean): void;
  reject(err: unknown): void;
}

/** How long an outcome keeps trying to reach a database that is down. */
const OUTCOME_RETRY_LIMIT_MS = 5 * 60_000;

/**
 * Records what happened to the jobs this worker ran, every outcome fenced by
 * (claimed_by, attempt) in SQL.
 *
 * Completions are batched: while one completion statement is in flight, the
 * next ones gather, and go together when it returns. At low load a completion
 * goes at once; under load one statement -- one commit, one counter upsert per
 * (queue, state) -- records hundreds. The commit is the bottleneck, so this is
 * where throughput comes from.
 */
export class OutcomeRecorder {
  private readonly logger = new Logger('Stampeded');
  private pending: PendingCompletion[] = [];
  private flushing?: Promise<void>;
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Jobs whose outcome is on its way: LostClaims must not give them back. */
  private readonly recording = new Map<string, number>();
  /** Places at the back of a key's order (toBackOfOrder): UUIDv7s, as the enqueue draws a job's first place. */
  private readonly positions = new UuidV7Source();

  /**
   * @param eventsChannel where the fleet hears of the outcomes, asked at each
   *   statement: while it answers a channel, the completion and the failure
   *   statements notify it, in their transaction (COMPLETE_MANY_NOTIFY);
   *   while it answers undefined (nobody listens), they notify nothing.
   */
  constructor(
    private readonly db: StampededDatabase,
    private readonly workerId: string,
    private readonly batchSize: number,
    private readonly eventsChannel: () => string | undefined = () => undefined,
  ) {}

  /**
   * Resolves true once the completion is recorded, with its result when it
   * has one, and false if the job was no longer ours.
   */
  complete(job: Job, result: string | null = null): Promise<boolean> {
    return this.track(
      [job],
      new Promise<boolean>((resolve, reject) => {
        this.pending.push({ job, result, resolve, reject });
        // One turn of the event loop first, so that jobs finishing together go
        // in one statement: flushed at once, the first job of every burst would
        // go alone, a whole commit for one row.
        if (!this.flushing) this.flushing = new Promise<void>((r) => setImmediate(r)).then(() => this.flush());
      }),
    );
  }

  private async flush(): Promise<void> {
    try {
      while (this.pending.length) {
        const batch = this.pending.splice(0, this.batchSize);
        try {
          const arrays = completionArrays(batch);
          const channel = this.eventsChannel();
          const rows = await this.persist(() =>
            channel === undefined
              ? this.db.query<{ id: string }>(COMPLETE_MANY, [this.workerId, ...arrays])
              : this.db.query<{ id: string | null }>(COMPLETE_MANY_NOTIFY, [this.workerId, ...arrays, taskArray(batch), channel]),
          );
          const done = new Set(rows.map((r) => r.id));
          for (const p of batch) p.resolve(done.has(p.job.id));
        } catch (err) {
          for (const p of batch) p.reject(err);
        }
      }
    } finally {
      this.flushing = undefined;
    }
  }

  async fail(job: Job, failure: FailureRecord): Promise<FailureResult> {
    const rows = await this.track(
      [job],
      this.persist(() => {
        const values = [
          job.queue,
          job.id,
          this.workerId,
          job.attempt,
          failure.kind,
          failure.error,
          failure.retryDelayMs === null ? null : Math.round(failure.retryDelayMs),
          failure.exitStatus ?? null,
        ];
        const channel = this.eventsChannel();
        return this.db.query<{ was: JobState; now_state: JobState; dead_lettered: boolean }>(
          channel === undefined ? FAIL : FAIL_NOTIFY,
          channel === undefined ? values : [...values, job.task, channel],
        );
      }),
    );
    if (!rows.length) return { owned: false };
    return { owned: true, state: rows[0].now_state, deadLettered: rows[0].dead_lettered };
  }

  /**
   * The failures of many jobs (a chunk's) in one statement, each fenced as
   * fail() fences one; answered in the order given. Sorted by id on the way,
   * so that two such statements lock their rows in one order.
   */
  async failMany(failures: readonly { job: Job; failure: FailureRecord }[]): Promise<FailureResult[]> {
    if (failures.length === 1) return [await this.fail(failures[0].job, failures[0].failure)];
    const sorted = [...failures].sort((a, b) => (a.job.id < b.job.id ? -1 : a.job.id > b.job.id ? 1 : 0));
    const column = <T>(pick: (f: { job: Job; failure: FailureRecord }) => T) => sorted.map(pick);
    const rows = await this.track(
      failures.map((f) => f.job),
      this.persist(() => {
        const values = [
          this.workerId,
          column((f) => f.job.queue),
          column((f) => f.job.id),
          column((f) => f.job.attempt),
          column((f) => f.failure.kind),
          column((f) => f.failure.error),
          column((f) => (f.failure.retryDelayMs === null ? null : Math.round(f.failure.retryDelayMs))),
          column((f) => f.failure.exitStatus ?? null),
          column((f) => f.job.task),
        ];
        const channel = this.eventsChannel();
        return this.db.query<{ id: string; now_state: JobState; dead_lettered: boolean }>(
          channel === undefined ? FAIL_MANY : FAIL_MANY_NOTIFY,
          channel === undefined ? values : [...values, channel],
        );
      }),
    );
    const recorded = new Map(rows.map((r) => [r.id, r]));
    return failures.map(({ job }) => {
      const row = recorded.get(job.id);
      return row ? { owned: true, state: row.now_state, deadLettered: row.dead_lettered } : { owned: false };
    });
  }

  /** Cancels a job this worker runs, fenced (CANCEL_CLAIMED): false when it was no longer ours, and nothing changed. */
  async cancel(job: Job): Promise<boolean> {
    const rows = await this.track(
      [job],
      this.persist(() => {
        const values = [job.queue, job.id, this.workerId, job.attempt];
        const channel = this.eventsChannel();
        return this.db.query(channel === undefined ? CANCEL_CLAIMED : CANCEL_CLAIMED_NOTIFY, channel === undefined ? values : [...values, job.task, channel]);
      }),
    );
    return rows.length > 0;
  }

  /**
   * Sends a keyed job that failed and will be retried to the back of its
   * key's order (ORDERING_TO_BACK). Best effort: a job left in place is only
   * waited for as the default waits for it.
   */
  async toBackOfOrder(job: Job): Promise<void> {
    const [position] = this.positions.many(1);
    await this.track(
      [job],
      this.persist(() => this.db.query(ORDERING_TO_BACK, [job.queue, job.id, job.attempt, position])),
    );
  }

  /** Gives a job back without spending its attempt: it runs again as if never claimed. */
  async release(job: Job): Promise<boolean> {
    const rows = await this.track(
      [job],
      this.persist(() => this.db.query(RELEASE, [job.queue, job.id, this.workerId, job.attempt])),
    );
    return rows.length > 0;
  }

  /** Waits for every outcome under way to be recorded (or given up on). */
  async settle(): Promise<void> {
    while (this.flushing || this.inFlight.size) {
      await Promise.allSettled([this.flushing, ...this.inFlight]);
    }
  }

  /** Whether an outcome of this job is on its way to the database. */
  isRecording(jobId: string): boolean {
    return this.recording.has(jobId);
  }

  private track<T>(jobs: readonly Job[], promise: Promise<T>): Promise<T> {
    this.inFlight.add(promise);
    for (const { id } of jobs) this.recording.set(id, (this.recording.get(id) ?? 0) + 1);
    void promise
      .finally(() => {
        this.inFlight.delete(promise);
        for (const { id } of jobs) {
          const n = (this.recording.get(id) ?? 1) - 1;
          if (n > 0) this.recording.set(id, n);
          else this.recording.delete(id);
        }
      })
      .catch(() => {});
    return promise;
  }

  /**
   * Retries an outcome while the database is unreachable. The job stays
   * ours in the meantime; if the worker dies first, the reaper or the expiry
   * gives it to someone else and this outcome is fenced out.
   */
  private async persist<T>(write: () => Promise<T>): Promise<T> {
    const started = Date.now();
    for (let attempt = 1; ; attempt++) {
      try {
        return await write();
      } catch (err) {
        // A deadlock or a serialization failure is as passing as a dropped
        // connection: StampededDatabase.query retries it three times, a busy
        // fleet can meet it a fourth, and a completion given up leaves the
        // finished job 'executing' until its expiry.
        if (!(isConnectionError(err) || isTransientConflict(err)) || Date.now() - started > OUTCOME_RETRY_LIMIT_MS) throw err;
        if (attempt === 1) this.logger.warn(`recording an outcome failed (${(err as Error).message}); retrying until the database answers`);
        await new Promise((r) => setTimeout(r, Math.min(5000, 100 * 2 ** attempt)));
      }
    }
  }
}

/** Errors that say the database could not be reached, not that the statement was wrong. */
export function isConnectionError(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  if (e?.code && /^(08|57P0|53300)/.test(e.code)) return true;
  return /ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|Connection terminated|connection timeout|Client has encountered a connection error|not queryable/i.test(
    e?.message ?? '',
  );
}

/** A deadlock (40P01) or serialization failure (40001): the statement lost a race; the same statement can win the next. */
export function isTransientConflict(err: unknown): boolean {
  const code = (err as { code?: string })?.code;
  return code === '40P01' || code === '40001';
}

/**
 * The completion's arrays as PostgreSQL array literals, written here: ids
 * are UUIDs and attempts integers, which need no quoting, and a queue is
 * quoted once per batch however many of its jobs the batch holds. Handed the
 * JS arrays, node-postgres escapes every element of every batch through a
 * regular expression (NOTES.md, "What the worker allocates per job"). The
 * results are NULL as a whole when no job of the batch has one, so that a
 * batch without results builds nothing more than it did before there were
 * results.
 */
export function completionArrays(
  batch: readonly { job: Job; result?: string | null }[],
): [queues: string, ids: string, attempts: string, results: string | null] {
  const quoted = new Map<string, string>();
  const queues = new Array<string>(batch.length);
  const ids = new Array<string>(batch.length);
  const attempts = new Array<number>(batch.length);
  let results: string[] | undefined;
  for (let i = 0; i < batch.length; i++) {
    const { job, result } = batch[i];
    let q = quoted.get(job.queue);
    if (q === undefined) quoted.set(job.queue, (q = arrayElement(job.queue)));
    queues[i] = q;
    ids[i] = job.id;
    attempts[i] = job.attempt;
    if (result != null) (results ??= new Array<string>(batch.length).fill('NULL'))[i] = arrayElement(result);
  }
  return [`{${queues.join(',')}}`, `{${ids.join(',')}}`, `{${attempts.join(',')}}`, results ? `{${results.join(',')}}` : null];
}

/** The batch's tasks as an array literal, for COMPLETE_MANY_NOTIFY: quoted once per task, as completionArrays quotes queues. */
export function taskArray(batch: readonly { job: Job }[]): string {
  const quoted = new Map<string, string>();
  const tasks = new Array<string>(batch.length);
  for (let i = 0; i < batch.length; i++) {
    const { task } = batch[i].job;
    let t = quoted.get(task);
    if (t === undefined) quoted.set(task, (t = arrayElement(task)));
    tasks[i] = t;
  }
  return `{${tasks.join(',')}}`;
}
