import { createDecipheriv, randomBytes } from 'node:crypto';
import { EncryptionError, StampededConfigError } from '../errors/stampeded.errors.js';
import { ENVELOPE_KEY, envelopeOf, type Envelope } from './envelope.js';
import { JobCipher } from './job-cipher.js';

const k1 = randomBytes(32);
const k2 = randomBytes(32).toString('base64');
const cipher = () => JobCipher.from('test', { keys: { k1, k2 }, current: 'k2' });
const sealed = (text: string) => JSON.parse(text) as Record<string, Envelope>;

describe('JobCipher', () => {
  it('seals JSON under the current key as a versioned envelope that names it, and opens it again', () => {
    const c = cipher();
    const text = c.seal('send-email', '{"to":"ada@example.com"}');
    expect(text).not.toContain('ada@example.com');
    const value = sealed(text);
    expect(Object.keys(value)).toEqual([ENVELOPE_KEY]);
    expect(value[ENVELOPE_KEY]).toMatchObject({ v: 1, alg: 'A256GCM', kid: 'k2' });
    expect(Buffer.from(value[ENVELOPE_KEY].iv, 'base64')).toHaveLength(12);
    expect(Buffer.from(value[ENVELOPE_KEY].tag, 'base64')).toHaveLength(16);
    expect(c.open('send-email', envelopeOf(value)!)).toBe('{"to":"ada@example.com"}');
    // A fresh IV each time: the same args never seal to the same text.
    expect(c.seal('send-email', '{"to":"ada@example.com"}')).not.toBe(text);
  });

  it('is what docs/encryption.md says: AES-256-GCM, the task name as additional data, base64 fields', () => {
    const value = sealed(cipher().seal('send-email', '{"n":1}'))[ENVELOPE_KEY];
    const decipher = createDecipheriv('aes-256-gcm', Buffer.from(k2, 'base64'), Buffer.from(value.iv, 'base64'));
    decipher.setAAD(Buffer.from('send-email', 'utf8'));
    decipher.setAuthTag(Buffer.from(value.tag, 'base64'));
    expect(Buffer.concat([decipher.update(Buffer.from(value.ct, 'base64')), decipher.final()]).toString('utf8')).toBe('{"n":1}');
  });

  it('opens with an older listed key, and refuses, naming the key, one it does not hold, another task, or a changed ciphertext', () => {
    const old = JobCipher.from('test', { keys: { k1 }, current: 'k1' });
    const envelope = envelopeOf(sealed(old.seal('t', '{"a":1}')))!;
    expect(cipher().open('t', envelope)).toBe('{"a":1}');

    const without = JobCipher.from('test', { keys: { k2 }, current: 'k2' });
    expect(() => without.open('t', envelope)).toThrow(EncryptionError);
    expect(() => without.open('t', envelope)).toThrow(/key "k1", which is not among this process's keys \(k2\)/);
    expect(() => cipher().open('other-task', envelope)).toThrow(/key "k1" for task "other-task", but that key does not open it/);
    const ct = Buffer.from(envelope.ct, 'base64');
    ct[0] ^= 1;
    expect(() => cipher().open('t', { ...envelope, ct: ct.toString('base64') })).toThrow(/does not open it/);
    expect(() => cipher().open('t', { ...envelope, v: 2 })).toThrow(/version 2/);
  });

  it('refuses keys that are not 32 bytes of base64 or a Buffer, and a current key that is not listed', () => {
    const refused = (options: unknown) => () => JobCipher.from('forRoot()', options as never);
    expect(refused({ keys: { k1: randomBytes(16) }, current: 'k1' })).toThrow(/key "k1" is 16 bytes; AES-256 needs 32/);
    expect(refused({ keys: { k1: 'not base64!' }, current: 'k1' })).toThrow(/key "k1" is not base64/);
    expect(refused({ keys: { k1: randomBytes(24).toString('base64') }, current: 'k1' })).toThrow(/24 bytes once decoded/);
    expect(refused({ keys: { k1 }, current: 'k9' })).toThrow(/current must be the id of one of the keys \(k1\), got "k9"/);
    expect(refused({ keys: {}, current: 'k1' })).toThrow(/at least one key/);
    expect(refused({ keys: { 'a b': k1 }, current: 'a b' })).toThrow(/key id "a b"/);
    expect(refused({ keys: { k1 }, current: 'k1', rotate: true })).toThrow(StampededConfigError);
  });
});

describe('envelopeOf', () => {
  it('reads an object whose only key is the envelope, and nothing else', () => {
    const inner = { v: 1, alg: 'A256GCM', kid: 'k', iv: '', tag: '', ct: '' };
    expect(envelopeOf({ [ENVELOPE_KEY]: inner })).toBe(inner);
    expect(envelopeOf({ [ENVELOPE_KEY]: inner, to: 'x' })).toBeNull();
    expect(envelopeOf({ [ENVELOPE_KEY]: 'text' })).toBeNull();
    expect(envelopeOf([inner])).toBeNull();
    expect(envelopeOf(null)).toBeNull();
    expect(envelopeOf('x')).toBeNull();
  });
});
