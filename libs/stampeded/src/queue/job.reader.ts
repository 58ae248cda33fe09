import type { StampededDatabase } from '../database/stampeded-database.js';
import type { ReadDatabase } from '../database/read-database.js';
import type { JobWaiters } from '../events/job-waiters.js';
import { InvalidJobError } from '../errors/stampeded.errors.js';
import { taskNameOf } from '../decorators/task-metadata.js';
import { LIMITS } from '../stampeded.constants.js';
import { INVALID_OPTION, OPTIONS_NOT_OBJECT } from '../stampeded.messages.js';
import { GET_JOB } from '../sql/jobs.sql.js';
import { JOB_LOG_LINES } from '../sql/job-logs.sql.js';
import { COUNTS } from '../sql/queues.sql.js';
import { JOB_STATES, type Job, type JobState, type QueueCounts } from '../interfaces/job.interface.js';
import type { TaskClass } from '../interfaces/task.interface.js';
import { describe, rejectUnknown, validateJobId, validateQueueName, validateTaskName } from './job-input.validator.js';
import { toJob, toJobLogs, type JobLogRow } from './job.mapper.js';
import type { JobEncryption } from '../encryption/job-encryption.js';

/** Where a getJob() or the like looks for the job. */
export interface FindJobOptions {
  /** Only in this queue (its partition alone is read). */
  queue?: string;
}

export interface GetJobOptions extends FindJobOptions {
  /** Read the lines its handler wrote with ctx.log() too, as `logs`. Default false: a second read. */
  logs?: boolean;
  /**
   * Read it from the replica (the module's `readConnection`), for display:
   * it may be a little behind, even behind this app's own enqueue or cancel.
   * Default false: the primary, which shows every write committed before.
   */
  replica?: boolean;
}

export interface WaitForOptions extends FindJobOptions {
  /** Give up after this long, with a JobWaitError (the job goes on). Default: no limit. */
  timeoutMs?: number;
  /** Give up when it aborts, with its reason (the job goes on). */
  signal?: AbortSignal;
}

/** The arguments of getJob() and the like: (task, id, options?) or (id, options?). */
export type FindJobCall<O = FindJobOptions> = [task: string | TaskClass, id: string, options?: O] | [id: string, options?: O];

const WAIT_FOR_OPTIONS = ['queue', 'timeoutMs', 'signal'];

/** Reads jobs: one by id, a wait for one to finish, the counts per state. */
export class JobReader {
  constructor(
    private readonly db: StampededDatabase,
    private readonly waiters: JobWaiters,
    private readonly encryption: JobEncryption,
    private readonly reads: Pick<ReadDatabase, 'query'> = db,
  ) {}

  async getJob(call: FindJobCall<GetJobOptions>): Promise<Job | null> {
    const { task, id, options } = findJobCall('getJob()', call, '{ queue?, logs?, replica? }');
    const { logs, replica } = options as GetJobOptions;
    for (const [name, value] of Object.entries({ logs, replica })) {
      if (value !== undefined && typeof value !== 'boolean')
        throw new InvalidJobError(INVALID_OPTION('getJob()', name, `must be true or false, got ${describe(value)}`));
    }
    const db = replica ? this.reads : this.db;
    const [[row], lines] = await Promise.all([db.query(GET_JOB, [id, options.queue ?? null]), logs ? db.query<JobLogRow>(JOB_LOG_LINES, [id]) : undefined]);
    if (!row || (task !== undefined && row.task !== task)) return null;
    const job = this.encryption.openForReading(toJob(row));
    if (lines) job.logs = toJobLogs(lines.map((line) => ({ ...line, message: this.encryption.readableLine(job.task, line.message) })));
    return job;
  }

  waitFor(call: FindJobCall<WaitForOptions>): Promise<Job> {
    const where = 'waitFor()';
    const { task, id, options } = findJobCall(where, call, '{ queue?, timeoutMs?, signal? }');
    const { queue, timeoutMs, signal } = options as WaitForOptions;
    rejectUnknown(where, options, WAIT_FOR_OPTIONS);
    if (queue !== undefined) validateQueueName(where, 'queue', queue);
    if (timeoutMs !== undefined && (!Number.isInteger(timeoutMs) || timeoutMs < 0 || timeoutMs > LIMITS.integer.max)) {
      throw new InvalidJobError(INVALID_OPTION(where, 'timeoutMs', `must be a whole number of milliseconds from 0 to ${LIMITS.integer.max}, got ${timeoutMs}`));
    }
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new InvalidJobError(
        INVALID_OPTION(where, 'signal', `must be an AbortSignal (from an AbortController, or AbortSignal.timeout()), got ${typeof signal}`),
      );
    }
    return this.waiters.wait({ id, queue, task, timeoutMs, signal });
  }

  /** Jobs per state, from the trigger-maintained counters (never count(*)). */
  async counts(queue?: string): Promise<QueueCounts | Record<string, QueueCounts>> {
    const rows = await this.db.query<{ queue: string; state: JobState; n: string }>(COUNTS, [queue ?? null]);
    const byQueue: Record<string, QueueCounts> = {};
    for (const { queue: q, state, n } of rows) (byQueue[q] ??= emptyCounts())[state] = Number(n);
    return queue === undefined ? byQueue : (byQueue[queue] ?? emptyCounts());
  }
}

/** A call of the form (task, id, options?) or (id, options?), the task as its name and the id checked. */
function findJobCall(where: string, call: FindJobCall<object>, shape = '{ queue? }'): { task?: string; id: string; options: FindJobOptions } {
  const [first, second, third] = call as unknown[];
  const byTask = typeof first === 'function' || typeof second === 'string';
  const options = (byTask ? third : second) ?? {};
  if (options === null || typeof options !== 'object') throw new InvalidJobError(OPTIONS_NOT_OBJECT(where, shape));
  if (!byTask) return { id: validateJobId(where, first), options };
  const task = typeof first === 'function' ? taskNameOf(first as TaskClass) : validateTaskName(where, 'task', first);
  return { task, id: validateJobId(where, second), options };
}

function emptyCounts(): QueueCounts {
  return Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as QueueCounts;
}
