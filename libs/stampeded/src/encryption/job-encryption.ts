import { EncryptionError, InvalidJobError, StampededConfigError } from '../errors/stampeded.errors.js';
import {
  ENCRYPTED_ARGS_UNREADABLE,
  ENCRYPTED_TOO_LARGE,
  ENCRYPTION_KEY_UNKNOWN,
  ENCRYPTION_KEYS_REQUIRED,
  ENVELOPE_UNREADABLE,
} from '../stampeded.messages.js';
import type { Job } from '../interfaces/job.interface.js';
import type { StampededModuleOptions } from '../interfaces/stampeded-options.interface.js';
import { envelopeOf, envelopeOfText } from './envelope.js';
import { JobCipher } from './job-cipher.js';

/** The app's queues as far as encryption asks: whether registerQueue() said `encrypt: true`. */
export interface EncryptedQueues {
  get(name: string): { encrypt?: boolean } | undefined;
}

/** What the worker learnt opening a claimed job's args (JobEncryption.openToRun). */
export interface OpenedArgs {
  /** Its args were stored encrypted, or its task or queue encrypts: its result is sealed, and its validate issues are not recorded. */
  readonly encrypted: boolean;
  /** Why its args could not be opened, naming the key: the job is discarded as unrecoverable with this. */
  readonly unreadable?: string;
}

const PLAIN: OpenedArgs = Object.freeze({ encrypted: false });
const OPENED: OpenedArgs = Object.freeze({ encrypted: true });

/** One cipher per options object: the keys are checked and decoded once, however many services ask. */
const ciphers = new WeakMap<StampededModuleOptions, JobCipher | null>();

/** The app's cipher, or null when forRoot() gave no `encryption`; a StampededConfigError when the keys are wrong. */
export function cipherOf(options: StampededModuleOptions): JobCipher | null {
  let cipher = ciphers.get(options);
  if (cipher === undefined) {
    cipher = options.encryption === undefined ? null : JobCipher.from('StampededModule.forRoot()', options.encryption);
    ciphers.set(options, cipher);
  }
  return cipher;
}

/**
 * Which jobs are stored encrypted, and the sealing and opening of their args
 * and results: the one home of that rule for the enqueue, the schedules, the
 * worker and the reads. A job is encrypted when its task says `encrypt:
 * true` or the queue it goes to does (registerQueue). Opening goes by what
 * is stored, not by the options: a job sealed elsewhere opens here when this
 * process holds its key.
 */
export class JobEncryption {
  readonly cipher: JobCipher | null;

  constructor(
    options: StampededModuleOptions,
    private readonly queues: EncryptedQueues,
  ) {
    this.cipher = cipherOf(options);
  }

  /** Whether a job of a task that declares `encrypt` (or not) on `queue` is stored encrypted. */
  required(taskEncrypts: boolean | undefined, queue: string): boolean {
    return taskEncrypts === true || this.queues.get(queue)?.encrypt === true;
  }

  /** Refuses, at startup, a task or queue that asks for encryption in an app without keys. */
  assertKeysFor(what: string): void {
    if (!this.cipher) throw new StampededConfigError(ENCRYPTION_KEYS_REQUIRED(what));
  }

  /** Args JSON text sealed for storage, or refused when the envelope passes the column's limit. */
  seal(where: string, option: 'args' | 'result', task: string, text: string, limit: number): string {
    this.assertKeysFor(`${where}: task "${task}"`);
    const sealed = this.cipher!.seal(task, text);
    const bytes = Buffer.byteLength(sealed, 'utf8');
    if (bytes > limit) throw new InvalidJobError(ENCRYPTED_TOO_LARGE(where, option, bytes, limit));
    return sealed;
  }

  /**
   * A stored value (args or a result) as its plaintext, for a process that
   * must read it: an EncryptionError naming the key when it cannot. Plain
   * JSON is returned as it is.
   */
  open(task: string, value: unknown): unknown {
    const envelope = envelopeOf(value);
    if (!envelope) return value;
    if (!this.cipher) throw new EncryptionError(ENCRYPTION_KEY_UNKNOWN(envelope.kid, []), envelope.kid);
    return JSON.parse(this.cipher.open(task, envelope));
  }

  /**
   * A claimed job's args opened in place, before its events, its validate
   * option and its handler see them. An isolated task's child process is
   * sent them opened, over its IPC channel: the keys stay in this process.
   */
  openToRun(job: Job, taskEncrypts: boolean | undefined): OpenedArgs {
    const envelope = envelopeOf(job.args);
    if (!envelope) return this.required(taskEncrypts, job.queue) ? OPENED : PLAIN;
    let args: unknown;
    try {
      args = this.open(job.task, job.args);
    } catch (err) {
      const problem = err instanceof EncryptionError ? err.message : ENVELOPE_UNREADABLE('its plaintext is not JSON');
      return { encrypted: true, unreadable: ENCRYPTED_ARGS_UNREADABLE(job.task, problem) };
    }
    if (args === null || typeof args !== 'object' || Array.isArray(args)) {
      return { encrypted: true, unreadable: ENCRYPTED_ARGS_UNREADABLE(job.task, ENVELOPE_UNREADABLE('its plaintext is not a JSON object')) };
    }
    job.args = args as Job['args'];
    return OPENED;
  }

  /**
   * A job read back for the app (getJob, waitFor): its args and result
   * opened where this process holds the key, and left as stored (the
   * envelope, which names its key) where it does not, so that a process
   * without keys still sees the job's state.
   */
  openForReading(job: Job): Job {
    job.args = this.readable(job.task, job.args) as Job['args'];
    job.result = this.readable(job.task, job.result);
    return job;
  }

  /**
   * A ctx.log() line of an encrypted job as it is stored: the envelope's JSON
   * text of the line as a JSON string, bound to the task's name as its args
   * are. The caller cuts the line so that the envelope fits the column
   * (LogReporter).
   */
  sealLine(task: string, line: string): string {
    this.assertKeysFor(`ctx.log(): task "${task}"`);
    return this.cipher!.seal(task, JSON.stringify(line));
  }

  /** A stored log line opened where this process holds its key, else as stored (the envelope's text, which names its key). */
  readableLine(task: string, stored: string): string {
    const envelope = envelopeOfText(stored);
    if (!envelope || !this.cipher) return stored;
    try {
      const line: unknown = JSON.parse(this.cipher.open(task, envelope));
      return typeof line === 'string' ? line : stored;
    } catch {
      return stored;
    }
  }

  /** A stored value opened where this process holds its key, else as stored (see openForReading). */
  readable(task: string, value: unknown): unknown {
    if (!this.cipher) return value;
    try {
      return this.open(task, value);
    } catch (err) {
      if (err instanceof EncryptionError) return value;
      throw err;
    }
  }
}
