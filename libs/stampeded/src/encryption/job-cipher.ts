import { EncryptionError, StampededConfigError } from '../errors/stampeded.errors.js';
import { ENCRYPTION_KEY_UNKNOWN, ENCRYPTION_NOT_AUTHENTIC, ENVELOPE_UNREADABLE, INVALID_ENCRYPTION_OPTION } from '../stampeded.messages.js';
import type { EncryptionOptions } from '../interfaces/encryption.interface.js';
import { ENVELOPE_ALGORITHM, ENVELOPE_VERSION, KEY_BYTES, openText, sealText, type Envelope } from './envelope.js';

const KEY_ID = /^[A-Za-z0-9_.:-]{1,64}$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * The keys of one app (forRoot's `encryption`) or of one CLI run: seals
 * JSON text under the current key and opens an envelope under whichever
 * listed key sealed it. Nest-free, so that the CLI loads it alone.
 */
export class JobCipher {
  private constructor(
    private readonly keys: ReadonlyMap<string, Buffer>,
    readonly current: string,
  ) {}

  /** The option checked, or a StampededConfigError saying what is wrong with it; `where` names who gave it. */
  static from(where: string, options: EncryptionOptions): JobCipher {
    const refuse = (problem: string): never => {
      throw new StampededConfigError(INVALID_ENCRYPTION_OPTION(where, problem));
    };
    if (options === null || typeof options !== 'object' || Array.isArray(options)) refuse(`must be an object, got ${typeof options}`);
    const unknown = Object.keys(options).filter((k) => k !== 'keys' && k !== 'current');
    if (unknown.length) refuse(`has unknown option(s) ${unknown.join(', ')}`);
    const given = options.keys as unknown;
    if (given === null || typeof given !== 'object' || Array.isArray(given) || Object.keys(given).length === 0) {
      refuse('keys must be an object of at least one key by its id');
    }
    const keys = new Map<string, Buffer>();
    for (const [id, value] of Object.entries(given as Record<string, unknown>)) {
      if (!KEY_ID.test(id)) refuse(`key id ${JSON.stringify(id)} must be 1 to 64 letters, digits, ".", "_", ":" or "-"`);
      keys.set(id, keyBytes(id, value, refuse));
    }
    if (typeof options.current !== 'string' || !keys.has(options.current)) {
      refuse(`current must be the id of one of the keys (${[...keys.keys()].join(', ')}), got ${JSON.stringify(options.current)}`);
    }
    return new JobCipher(keys, options.current);
  }

  /** The ids of the keys this cipher holds. */
  keyIds(): string[] {
    return [...this.keys.keys()];
  }

  has(keyId: string): boolean {
    return this.keys.has(keyId);
  }

  /** JSON text as an envelope's JSON text, under the current key, bound to the task's name. */
  seal(task: string, plaintext: string): string {
    return sealText(plaintext, this.keys.get(this.current)!, this.current, task);
  }

  /** The JSON text an envelope of the task holds; an EncryptionError, naming the key, when it cannot be opened. */
  open(task: string, envelope: Envelope): string {
    if (envelope.v !== ENVELOPE_VERSION || envelope.alg !== ENVELOPE_ALGORITHM) {
      const found = `version ${JSON.stringify(envelope.v)}, alg ${JSON.stringify(envelope.alg)}`;
      throw new EncryptionError(ENVELOPE_UNREADABLE(`${found}, where this runtime reads version ${ENVELOPE_VERSION}, alg ${ENVELOPE_ALGORITHM}`));
    }
    if (typeof envelope.kid !== 'string' || typeof envelope.iv !== 'string' || typeof envelope.tag !== 'string' || typeof envelope.ct !== 'string') {
      throw new EncryptionError(ENVELOPE_UNREADABLE('kid, iv, tag and ct must each be text'));
    }
    const key = this.keys.get(envelope.kid);
    if (!key) throw new EncryptionError(ENCRYPTION_KEY_UNKNOWN(envelope.kid, this.keyIds()), envelope.kid);
    try {
      return openText(envelope, key, task);
    } catch {
      throw new EncryptionError(ENCRYPTION_NOT_AUTHENTIC(envelope.kid, task), envelope.kid);
    }
  }
}

function keyBytes(id: string, value: unknown, refuse: (problem: string) => never): Buffer {
  if (value instanceof Uint8Array) {
    if (value.length !== KEY_BYTES) refuse(`key "${id}" is ${value.length} bytes; AES-256 needs ${KEY_BYTES}`);
    return Buffer.from(value);
  }
  if (typeof value !== 'string') refuse(`key "${id}" must be a Buffer or base64 text, got ${value === null ? 'null' : typeof value}`);
  const text = value as string;
  const bytes = Buffer.from(text, 'base64');
  // Buffer.from skips what is not base64: a key pasted with a typo would be shorter, or another key.
  if (!BASE64.test(text) || bytes.toString('base64') !== text) refuse(`key "${id}" is not base64 text (as \`openssl rand -base64 32\` prints it)`);
  if (bytes.length !== KEY_BYTES) refuse(`key "${id}" is ${bytes.length} bytes once decoded; AES-256 needs ${KEY_BYTES}`);
  return bytes;
}
