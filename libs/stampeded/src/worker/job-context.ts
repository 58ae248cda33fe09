import { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import { CHECKPOINT, TOUCH } from '../sql/jobs.sql.js';
import { CheckpointError } from '../errors/stampeded.errors.js';
import { CHECKPOINT_TOO_LARGE } from '../stampeded.messages.js';
import { LIMITS } from '../stampeded.constants.js';
import { toJsonObject } from '../queue/job-input.validator.js';
import type { Job } from '../interfaces/job.interface.js';
import type { JobContext } from '../interfaces/task.interface.js';

/** What a job run tells its context, and hears back from it. */
export interface JobRunHooks {
  /** The job answered a touch or saved a checkpoint: push its deadline back. */
  onAlive(): void;
  /** The database says the job is no longer ours. */
  onLost(reason: string): void;
}

const logger = new Logger('Stampeded');

function ignoreError(): void {}

export function createJobContext(
  db: StampededDatabase,
  workerId: string,
  job: Job,
  /** Called when the handler first reads ctx.signal: most never do. */
  signal: () => AbortSignal,
  hooks: JobRunHooks,
): JobContext {
  const fence = [job.queue, job.id, workerId, job.attempt];
  return {
    id: job.id,
    queue: job.queue,
    task: job.task,
    attempt: job.attempt,
    maxAttempts: job.maxAttempts,
    tenantId: job.tenantId,
    destination: job.destination,
    meta: job.meta,
    get signal() {
      return signal();
    },
    checkpoint: job.checkpoint ?? null,
    async touch() {
      const [row] = await db.query<{ owned: boolean | null }>(TOUCH, fence);
      if (row?.owned) {
        hooks.onAlive();
        return true;
      }
      hooks.onLost('touch found the job no longer owned by this worker');
      return false;
    },
    async saveCheckpoint(state: unknown) {
      const text = state === undefined ? 'null' : JSON.stringify(state);
      if (state !== null && typeof state === 'object' && !Array.isArray(state)) {
        toJsonObject(`checkpoint of job ${job.id}`, 'state', state, Number.MAX_SAFE_INTEGER);
      }
      const bytes = Buffer.byteLength(text ?? 'null', 'utf8');
      if (bytes > LIMITS.checkpointBytes) throw new CheckpointError(CHECKPOINT_TOO_LARGE(bytes, LIMITS.checkpointBytes));
      // The schema RAISEs a WARNING when a large checkpoint keeps growing;
      // node-postgres hands it over as a notice on the connection that ran it.
      const client = await db.pool.connect();
      const onNotice = (notice: { severity?: string; message?: string }) => {
        if (notice.severity === 'WARNING') logger.warn(`job ${job.id} (${job.task}): ${notice.message}`);
      };
      client.on('notice', onNotice);
      // A checked-out client has no 'error' listener of the pool's: a cut
      // connection would otherwise end the process (see StampededDatabase.transaction).
      client.on('error', ignoreError);
      try {
        const bound = db.statement(CHECKPOINT);
        const result = await client.query<{ seq: number | null }>({ name: bound.name, text: bound.text, values: [...fence, text] });
        if (result.rows[0]?.seq == null) {
          hooks.onLost('saveCheckpoint found the job no longer owned by this worker');
          throw new CheckpointError(`Checkpoint of job ${job.id} not saved: this worker no longer owns the job (cancelled, timed out or reaped).`);
        }
        hooks.onAlive();
      } catch (err) {
        if ((err as { code?: string }).code === '23514') throw new CheckpointError(CHECKPOINT_TOO_LARGE(bytes, LIMITS.checkpointBytes));
        throw err;
      } finally {
        client.off('notice', onNotice);
        client.off('error', ignoreError);
        client.release();
      }
    },
  };
}
