import { Injectable } from '@nestjs/common';
import { StampededConfigError } from '../errors/stampeded.errors.js';
import {
  CATCH_ALL_HOLDS_QUEUE_JOBS,
  DEFAULT_QUEUE_PARTITION,
  INVALID_OPTION,
  NOT_A_WHOLE_NUMBER,
  QUEUE_DEFAULTS_NAME_ANOTHER_QUEUE,
  QUEUE_PARTITION_TAKEN,
  UNKNOWN_OPTIONS,
} from '../stampeded.messages.js';
import { describe, validateJobOptions, validateQueueName } from './job-input.validator.js';
import { CREATE_QUEUE, PARTITION_NAME, PARTITION_OWNER, PROVISION_LOCK } from '../sql/queues.sql.js';
import type { Statement } from '../sql/statement.js';
import type { QueryResultRow } from 'pg';
import type { StampededDatabase } from '../database/stampeded-database.js';
import type { RegisterQueueOptions } from '../interfaces/stampeded-options.interface.js';
import { validateQueuePolicy } from '../control/control.config.js';

const REGISTER_QUEUE_OPTIONS = ['name', 'unlogged', 'concurrency', 'defaultJobOptions', 'policy', 'encrypt', 'instance'];

/** The queues registered with StampededModule.registerQueue(), provisioned at bootstrap. */
@Injectable()
export class QueueRegistry {
  private readonly queues = new Map<string, RegisterQueueOptions>();

  register(options: RegisterQueueOptions): void {
    const where = `StampededModule.registerQueue(${JSON.stringify(options?.name)})`;
    const unknown = Object.keys(options ?? {}).filter((k) => !REGISTER_QUEUE_OPTIONS.includes(k));
    if (unknown.length) throw new StampededConfigError(UNKNOWN_OPTIONS(where, unknown, REGISTER_QUEUE_OPTIONS));
    validateQueueName(where, 'name', options.name);
    if (options.concurrency !== undefined && (!Number.isInteger(options.concurrency) || options.concurrency < 1)) {
      throw new StampededConfigError(NOT_A_WHOLE_NUMBER(where, 'concurrency', options.concurrency, 1));
    }
    validateJobOptions(`${where} defaultJobOptions`, options.defaultJobOptions);
    validateQueuePolicy(where, options.policy);
    if (options.encrypt !== undefined && typeof options.encrypt !== 'boolean') {
      throw new StampededConfigError(INVALID_OPTION(where, 'encrypt', `must be true or false, got ${describe(options.encrypt)}`));
    }
    if (options.defaultJobOptions?.queue !== undefined && options.defaultJobOptions.queue !== options.name) {
      throw new StampededConfigError(QUEUE_DEFAULTS_NAME_ANOTHER_QUEUE(where, options.name, options.defaultJobOptions.queue));
    }
    const previous = this.queues.get(options.name);
    this.queues.set(options.name, { ...previous, ...options });
  }

  get(name: string): RegisterQueueOptions | undefined {
    return this.queues.get(name);
  }

  names(): string[] {
    return [...this.queues.keys()];
  }

  /**
   * Gives each registered queue its own partition. Two names that differ only
   * by punctuation map to one partition name; the second is refused rather
   * than silently landing in the catch-all.
   */
  async provision(db: StampededDatabase): Promise<void> {
    for (const queue of this.queues.values()) {
      // One process at a time per schema: processes of a fleet start together,
      // and stampeded_create_queue's "exists?" check and its CREATE are two
      // steps, so two of them creating one partition would race to "relation
      // already exists". The lock is the transaction's, released at its end.
      await db.transaction(async (client) => {
        const run = async <Row extends QueryResultRow>(statement: Statement, values: unknown[]) => {
          return (await client.query<Row>(db.queryConfig(statement, values))).rows;
        };
        await run(PROVISION_LOCK, [db.schema]);
        const [{ partition }] = await run<{ partition: string }>(PARTITION_NAME, [queue.name]);
        if (partition === 'stampeded_jobs_default') {
          if (queue.unlogged) throw new StampededConfigError(DEFAULT_QUEUE_PARTITION(queue.name));
          return;
        }
        const owner = await run<{ queue: string }>(PARTITION_OWNER, [partition]);
        if (owner.length && owner[0].queue !== queue.name) {
          throw new StampededConfigError(QUEUE_PARTITION_TAKEN(queue.name, partition, owner[0].queue));
        }
        if (owner.length) return;
        try {
          await run(CREATE_QUEUE, [queue.name, queue.unlogged ?? false]);
        } catch (err) {
          if ((err as { code?: string }).code === '23514') {
            throw new StampededConfigError(CATCH_ALL_HOLDS_QUEUE_JOBS(queue.name));
          }
          throw err;
        }
      });
    }
  }
}
