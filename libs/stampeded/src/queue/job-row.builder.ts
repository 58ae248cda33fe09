import type { TaskRegistry, ResolvedTask } from '../explorer/task.registry.js';
import type { QueueRegistry } from './queue.registry.js';
import type { JobColumnDefaults } from './job-column-defaults.js';
import { buildJobRow, type JobRow } from './job-input.validator.js';
import { InvalidJobError } from '../errors/stampeded.errors.js';
import { INVALID_ARGS, OPTIONS_NOT_OBJECT } from '../stampeded.messages.js';
import type { EnqueueOptions } from '../interfaces/job-options.interface.js';
import type { StampededModuleOptions } from '../interfaces/stampeded-options.interface.js';
import type { TaskClass } from '../interfaces/task.interface.js';
import type { JobEncryption } from '../encryption/job-encryption.js';
import { LIMITS } from '../stampeded.constants.js';

/** One job to enqueue, as enqueue(), enqueueMany() and the workflows take it. */
export interface JobRequest {
  task: string | TaskClass;
  args?: unknown;
  options?: EnqueueOptions;
}

/**
 * The rows enqueue inserts, each validated before anything is written: the
 * task resolved (TaskRegistry.resolve), its options layered over its queue's
 * and the module's defaults and the table's column defaults, its args
 * checked by the task's validate option, then sealed when its task or
 * queue encrypts (JobEncryption): every way of enqueueing builds its rows
 * here, so no plaintext of an encrypted task reaches a statement.
 */
export class JobRowBuilder {
  constructor(
    private readonly tasks: TaskRegistry,
    private readonly queues: QueueRegistry,
    private readonly options: StampededModuleOptions,
    private readonly columnDefaults: JobColumnDefaults,
    private readonly encryption: JobEncryption,
  ) {}

  /**
   * The rows of `jobs`, `where(i)` naming each in a refusal. An asynchronous
   * args check is awaited for every job before the first refusal is
   * thrown, so that none runs on after the call returns.
   */
  async build(jobs: readonly JobRequest[], where: (index: number) => string): Promise<JobRow[]> {
    const checks: Promise<void>[] = [];
    const encrypts: boolean[] = [];
    const rows = jobs.map((job, i) => {
      const { row, task } = this.row(where(i), job);
      const invalid = checkArgs(where(i), task, row);
      if (invalid) checks.push(invalid);
      encrypts.push(this.encryption.required(task.encrypt, row.queue));
      return row;
    });
    if (checks.length) {
      const refused = (await Promise.allSettled(checks)).find((check) => check.status === 'rejected');
      if (refused) throw refused.reason;
    }
    // Sealed once checked: the validate option reads the plaintext.
    rows.forEach((row, i) => {
      if (encrypts[i]) row.args = this.encryption.seal(where(i), 'args', row.task, row.args, LIMITS.argsBytes);
    });
    return rows;
  }

  /** One job's row, its task resolved once for its defaults and for the check of its args. */
  row(where: string, { task, args, options = {} }: JobRequest): { row: JobRow; task: ResolvedTask } {
    if (options === null || typeof options !== 'object') throw new InvalidJobError(OPTIONS_NOT_OBJECT(where, '{ queue?, priority?, ... }'));
    const resolved = this.tasks.resolve(task);
    const queueName = options.queue ?? resolved.defaults.queue;
    const queueDefaults = queueName ? (this.queues.get(queueName)?.defaultJobOptions ?? {}) : {};
    const layers = [this.options.defaultJobOptions ?? {}, queueDefaults, resolved.defaults];
    return { row: buildJobRow(where, resolved.name, args, options, layers, this.columnDefaults), task: resolved };
  }
}

/**
 * The task's validate option on the row's args, for a task that has one:
 * throws at once when a synchronous check refuses them, or returns a
 * promise that rejects when an asynchronous one does. Undefined when there
 * is nothing to wait for. It checks the args as the row stores them, as
 * JSON, which is what the worker checks again and the handler receives:
 * a Date is a string by then, and a key whose value is undefined is gone.
 */
function checkArgs(where: string, task: ResolvedTask, row: JobRow): Promise<void> | undefined {
  const validator = task.argsValidator;
  if (!validator) return undefined;
  const refuse = (issues: string[]) => {
    if (issues.length) throw new InvalidJobError(INVALID_ARGS(where, row.task, issues));
  };
  const issues = validator.issues(JSON.parse(row.args));
  if (!Array.isArray(issues)) return issues.then(refuse);
  refuse(issues);
  return undefined;
}
