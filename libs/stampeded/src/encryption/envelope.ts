import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * The one key of the JSON object that stands in a jobs row for encrypted
 * args (or an encrypted result): `{"$stampeded:enc": {v, alg, kid, iv, tag,
 * ct}}`. An object still, as the schema requires args to be, so that no
 * column changes. docs/encryption.md describes it for other runtimes. A
 * colon, not an underscore: a statement's `stampeded_` names are qualified
 * with the schema (qualify()), and the key sits in statements' text.
 */
export const ENVELOPE_KEY = '$stampeded:enc';
/** Version 1: AES-256-GCM, a 12-byte random IV, a 16-byte tag, the task's name as additional data. */
export const ENVELOPE_VERSION = 1;
/** Version 1's algorithm, as JOSE names it; stored so that the envelope says what it is. */
export const ENVELOPE_ALGORITHM = 'A256GCM';

const ALGORITHM = 'aes-256-gcm';
const IV_BYTES = 12;
const TAG_BYTES = 16;
export const KEY_BYTES = 32;

/** The envelope's fields, each text: the key's id, then base64 of the IV, the tag and the ciphertext. */
export interface Envelope {
  v: number;
  alg: string;
  kid: string;
  iv: string;
  tag: string;
  ct: string;
}

/**
 * The envelope `value` is, or null when it is plain JSON. An envelope is an
 * object whose only key is ENVELOPE_KEY: args that merely contain that key
 * among others are the user's own.
 */
export function envelopeOf(value: unknown): Envelope | null {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return null;
  const inner = (value as Record<string, unknown>)[ENVELOPE_KEY];
  if (inner === null || typeof inner !== 'object' || Array.isArray(inner)) return null;
  for (const key in value) if (key !== ENVELOPE_KEY) return null;
  return inner as Envelope;
}

/**
 * The envelope a stored text is (a log line of an encrypted job, whose
 * column is text, not jsonb), or null when it is a plain line: a line that
 * is exactly an envelope's JSON, as envelopeOf() reads one.
 */
export function envelopeOfText(text: string): Envelope | null {
  if (!text.startsWith(`{"${ENVELOPE_KEY}"`)) return null;
  try {
    return envelopeOf(JSON.parse(text));
  } catch {
    return null;
  }
}

/**
 * `plaintext` (JSON text) encrypted under `key` as an envelope's JSON text.
 * `aad` (the job's task name) is authenticated, not stored: the envelope
 * opens only for a job of the same task.
 */
export function sealText(plaintext: string, key: Buffer, kid: string, aad: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv(ALGORITHM, key, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  const envelope: Envelope = {
    v: ENVELOPE_VERSION,
    alg: ENVELOPE_ALGORITHM,
    kid,
    iv: iv.toString('base64'),
    tag: cipher.getAuthTag().toString('base64'),
    ct: ct.toString('base64'),
  };
  return JSON.stringify({ [ENVELOPE_KEY]: envelope });
}

/**
 * The plaintext of an envelope of version 1 whose key is `key`. Throws when
 * the ciphertext, the tag or `aad` is not what was sealed, or `key` is not
 * the key that sealed it: GCM cannot tell these apart.
 */
export function openText(envelope: Envelope, key: Buffer, aad: string): string {
  const iv = Buffer.from(envelope.iv, 'base64');
  const tag = Buffer.from(envelope.tag, 'base64');
  if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) throw new Error(`iv must be ${IV_BYTES} bytes and tag ${TAG_BYTES}`);
  const decipher = createDecipheriv(ALGORITHM, key, iv, { authTagLength: TAG_BYTES });
  decipher.setAAD(Buffer.from(aad, 'utf8'));
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(Buffer.from(envelope.ct, 'base64')), decipher.final()]).toString('utf8');
}
