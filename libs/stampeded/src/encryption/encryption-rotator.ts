import type { RedriveDatabase } from '../queue/dead-letter-redriver.js';
import { describe, fail, rejectUnknown } from '../queue/job-input.validator.js';
import { EncryptionError } from '../errors/stampeded.errors.js';
import { ROTATE_JOBS, ROTATE_SCHEDULES, ROTATION_JOBS_PAGE, ROTATION_SCHEDULES_PAGE } from '../sql/encryption.sql.js';
import type { Statement } from '../sql/statement.js';
import type { RotateEncryptionOptions, RotateEncryptionResult } from '../interfaces/encryption.interface.js';
import { envelopeOf } from './envelope.js';
import type { JobCipher } from './job-cipher.js';

const ROTATE_OPTION_NAMES = ['batchSize', 'dryRun', 'onProgress'];
/** Jobs a rotation reads and writes per statement unless told otherwise: envelopes of up to 1 MB each are held in memory a batch at a time. */
export const ROTATE_BATCH_SIZE = 200;
const MAX_BATCH_SIZE = 5000;
const RUNNING = new Set(['claimed', 'executing']);
const NIL_UUID = '00000000-0000-0000-0000-000000000000';

/** One stored value re-sealed: its new envelope, the IV of the one it replaces (the write's fence), and that one's key. */
type Resealed = { text: string; iv: string; from: string };
/** One row to write, and the former keys of the values it re-seals. */
type Rewrite = { record: Record<string, unknown>; from: string[] };

/**
 * Re-encrypts what is stored under older keys with the current one: the
 * args and results of every job (dead letters included) and the args of
 * every schedule. The one implementation behind `stampeded encryption
 * rotate`. Free of Nest, so that the CLI loads it alone.
 */
export class EncryptionRotator {
  constructor(
    private readonly db: RedriveDatabase,
    private readonly cipher: JobCipher,
  ) {}

  async rotate(options: RotateEncryptionOptions = {}, where = 'rotate()'): Promise<RotateEncryptionResult> {
    const { batchSize, dryRun, onProgress } = validateRotate(where, options);
    const result: RotateEncryptionResult = { current: this.cipher.current, jobs: 0, schedules: 0, running: 0, unreadable: {}, fromKeys: {}, dryRun };
    /** Writes a batch (or, dry, writes nothing), counting by their former keys the values of the records written. */
    const write = async (statement: Statement, writes: Rewrite[], id: (record: Record<string, unknown>) => string): Promise<number> => {
      const written = dryRun ? null : new Set((await this.db.query(statement, [jsonRecords(writes.map((w) => w.record))])).map((row) => id(row)));
      let n = 0;
      for (const w of writes) {
        if (written && !written.has(id(w.record))) continue;
        n++;
        for (const kid of w.from) result.fromKeys[kid] = (result.fromKeys[kid] ?? 0) + 1;
      }
      return n;
    };

    let after = { queue: '', id: NIL_UUID };
    for (;;) {
      const rows = await this.db.query(ROTATION_JOBS_PAGE, [after.queue, after.id, this.cipher.current, batchSize]);
      const writes: Rewrite[] = [];
      for (const row of rows) {
        // A real run leaves running jobs to ROTATE_JOBS's fence, which also holds for a job claimed after this read.
        if (dryRun && RUNNING.has(row.state)) {
          result.running++;
          continue;
        }
        const args = this.reseal(row.task, row.args, result.unreadable);
        const stored = this.reseal(row.task, row.result, result.unreadable);
        if (!args && !stored) continue;
        const record = { queue: row.queue, id: row.id, args: args?.text, args_iv: args?.iv, result: stored?.text, result_iv: stored?.iv };
        writes.push({ record, from: [args?.from, stored?.from].filter((kid): kid is string => kid !== undefined) });
      }
      if (writes.length) {
        const written = await write(ROTATE_JOBS, writes, (r) => String(r.id));
        // Refused by the fence: running, or given new args or a new result since this page was read.
        result.running += writes.length - written;
        result.jobs += written;
        onProgress?.(result.jobs);
      }
      if (rows.length < batchSize) break;
      const last = rows[rows.length - 1];
      after = { queue: last.queue, id: last.id };
    }
    let afterKey = '';
    for (;;) {
      const rows = await this.db.query(ROTATION_SCHEDULES_PAGE, [afterKey, this.cipher.current, batchSize]);
      const writes: Rewrite[] = [];
      for (const row of rows) {
        const args = this.reseal(row.task, row.args, result.unreadable);
        if (args) writes.push({ record: { key: row.key, args: args.text, iv: args.iv }, from: [args.from] });
      }
      if (writes.length) result.schedules += await write(ROTATE_SCHEDULES, writes, (r) => String(r.key));
      if (rows.length < batchSize) break;
      afterKey = rows[rows.length - 1].key;
    }
    return result;
  }

  /**
   * A stored value sealed again under the current key, or null when it is
   * plain, already under the current key, or under a key this cipher does not
   * hold (counted in `unreadable`, by key, and left as it is).
   */
  private reseal(task: string, value: unknown, unreadable: Record<string, number>): Resealed | null {
    const envelope = envelopeOf(value);
    if (!envelope || envelope.kid === this.cipher.current) return null;
    let plaintext: string;
    try {
      plaintext = this.cipher.open(task, envelope);
    } catch (err) {
      if (!(err instanceof EncryptionError)) throw err;
      const key = String(envelope.kid);
      unreadable[key] = (unreadable[key] ?? 0) + 1;
      return null;
    }
    return { text: this.cipher.seal(task, plaintext), iv: envelope.iv, from: envelope.kid };
  }
}

/** Records as one JSON array, each envelope spliced in as JSON: it is already JSON text. */
function jsonRecords(records: Record<string, unknown>[]): string {
  return `[${records
    .map(
      (r) =>
        `{${Object.entries(r)
          .filter(([, v]) => v !== undefined)
          .map(([k, v]) => `"${k}":${k === 'args' || k === 'result' ? v : JSON.stringify(v)}`)
          .join(',')}}`,
    )
    .join(',')}]`;
}

function validateRotate(
  where: string,
  options: RotateEncryptionOptions,
): Required<Omit<RotateEncryptionOptions, 'onProgress'>> & Pick<RotateEncryptionOptions, 'onProgress'> {
  if (options === null || typeof options !== 'object') fail(where, 'options', `must be an object, got ${describe(options)}`);
  rejectUnknown(where, options, ROTATE_OPTION_NAMES);
  const batchSize = options.batchSize ?? ROTATE_BATCH_SIZE;
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > MAX_BATCH_SIZE) {
    fail(where, 'batchSize', `must be an integer from 1 to ${MAX_BATCH_SIZE}, got ${describe(batchSize)}`);
  }
  if (options.onProgress !== undefined && typeof options.onProgress !== 'function') fail(where, 'onProgress', 'must be a function');
  return { batchSize, dryRun: options.dryRun === true, onProgress: options.onProgress };
}
