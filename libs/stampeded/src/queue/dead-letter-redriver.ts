import type { QueryResultRow } from 'pg';
import { InvalidJobError } from '../errors/stampeded.errors.js';
import { REDRIVE_UNKNOWN_QUEUE } from '../stampeded.messages.js';
import { DEAD_LETTER_QUEUES, REDRIVE_BATCH, REDRIVE_BOUND, REDRIVE_PREVIEW, REDRIVE_QUEUE_KNOWN } from '../sql/dead-letters.sql.js';
import { describe, fail, rejectUnknown, validateQueueName, validateTaskName } from './job-input.validator.js';
import type { Statement } from '../sql/statement.js';
import type { RedriveOptions, RedriveResult, RedriveSource } from '../interfaces/redrive.interface.js';

/**
 * What the redrive needs of a database: StampededDatabase fits (it binds each
 * statement to the install's schema), and so does any connection whose
 * search_path names that schema (the CLI's).
 */
export interface RedriveDatabase {
  query<Row extends QueryResultRow = QueryResultRow>(statement: Statement, values?: unknown[]): Promise<Row[]>;
}

export const REDRIVE_OPTION_NAMES = ['task', 'fingerprint', 'dryRun', 'batchSize', 'onProgress'] as const;
const DEFAULT_BATCH_SIZE = 1000;
const MAX_BATCH_SIZE = 10_000;

/**
 * Puts a dead-letter queue's copies back on their source queues as fresh
 * jobs: the one implementation behind QueueService.redrive(), the
 * dashboard's redrive and `stampeded dlq redrive`. Free of Nest, so that the
 * CLI can load it without the module.
 */
export class DeadLetterRedriver {
  constructor(private readonly db: RedriveDatabase) {}

  /**
   * Checks everything before it writes anything, then moves the copies batch
   * by batch (one statement and one transaction each), calling onProgress
   * after each. `declaredQueues` are queues the caller knows to be real
   * though no job may have reached them yet: a dead-letter queue that
   * nothing has failed into is empty, not misspelt.
   */
  async redrive(
    deadLetterQueue: string,
    options: RedriveOptions = {},
    context: { where?: string; declaredQueues?: Iterable<string> } = {},
  ): Promise<RedriveResult> {
    const where = context.where ?? 'redrive()';
    const { task, fingerprint, dryRun, batchSize, onProgress } = validateRedrive(where, deadLetterQueue, options);
    const [{ known }] = await this.db.query<{ known: boolean }>(REDRIVE_QUEUE_KNOWN, [deadLetterQueue]);
    if (!known && ![...(context.declaredQueues ?? [])].includes(deadLetterQueue)) {
      const holding = await this.db.query<{ queue: string }>(DEAD_LETTER_QUEUES);
      throw new InvalidJobError(
        REDRIVE_UNKNOWN_QUEUE(
          where,
          deadLetterQueue,
          holding.map((r) => r.queue),
        ),
      );
    }
    const [{ bound }] = await this.db.query<{ bound: string }>(REDRIVE_BOUND);

    if (dryRun) {
      const rows = await this.db.query<{ source_queue: string; task: string; jobs: string }>(REDRIVE_PREVIEW, [deadLetterQueue, task, fingerprint, bound]);
      const bySource = sortSources(rows.map((r) => ({ sourceQueue: r.source_queue, task: r.task, jobs: Number(r.jobs) })));
      return { queue: deadLetterQueue, dryRun: true, moved: total(bySource), bySource };
    }

    const moved = new Map<string, RedriveSource>();
    let count = 0;
    let after: string | null = null;
    for (;;) {
      const [row]: { last_id: string | null; moved: { source_queue: string; task: string; jobs: number }[] }[] = await this.db.query(REDRIVE_BATCH, [
        deadLetterQueue,
        task,
        fingerprint,
        bound,
        after,
        batchSize,
      ]);
      if (row.last_id === null) break;
      after = row.last_id;
      for (const m of row.moved) {
        const key = JSON.stringify([m.source_queue, m.task]);
        const entry = moved.get(key) ?? { sourceQueue: m.source_queue, task: m.task, jobs: 0 };
        entry.jobs += m.jobs;
        moved.set(key, entry);
        count += m.jobs;
      }
      if (row.moved.length) onProgress?.(count);
    }
    return { queue: deadLetterQueue, dryRun: false, moved: count, bySource: sortSources([...moved.values()]) };
  }
}

/** The options as the statements take them, or an error that says what to change; nothing is read or written first. */
function validateRedrive(where: string, queue: unknown, options: RedriveOptions) {
  validateQueueName(where, 'deadLetterQueue', queue);
  if (options === null || typeof options !== 'object') fail(where, 'options', 'must be an object');
  rejectUnknown(where, options, REDRIVE_OPTION_NAMES);
  const task = options.task === undefined ? null : validateTaskName(where, 'task', options.task);
  let fingerprint: Buffer | null = null;
  if (options.fingerprint !== undefined) {
    if (typeof options.fingerprint !== 'string' || !/^[0-9a-f]{64}$/i.test(options.fingerprint)) {
      fail(
        where,
        'fingerprint',
        `must be 64 hex characters, as the dashboard's errors page shows it (encode(error_fingerprint, 'hex')), got ${describe(options.fingerprint)}`,
      );
    }
    fingerprint = Buffer.from(options.fingerprint, 'hex');
  }
  if (options.dryRun !== undefined && typeof options.dryRun !== 'boolean') {
    fail(where, 'dryRun', `must be true or false, got ${describe(options.dryRun)}`);
  }
  const batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE;
  if (typeof batchSize !== 'number' || !Number.isInteger(batchSize) || batchSize < 1 || batchSize > MAX_BATCH_SIZE) {
    fail(where, 'batchSize', `must be an integer from 1 to ${MAX_BATCH_SIZE}, got ${describe(batchSize)}`);
  }
  if (options.onProgress !== undefined && typeof options.onProgress !== 'function') {
    fail(where, 'onProgress', `must be a function (moved) => void, got ${describe(options.onProgress)}`);
  }
  return { task, fingerprint, dryRun: options.dryRun === true, batchSize, onProgress: options.onProgress };
}

function total(sources: RedriveSource[]): number {
  return sources.reduce((n, s) => n + s.jobs, 0);
}

/** In one order whatever the database's collation, so that a dry run and the run it previews list alike. */
function sortSources(sources: RedriveSource[]): RedriveSource[] {
  return sources.sort((a, b) => compare(a.sourceQueue, b.sourceQueue) || compare(a.task, b.task));
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
