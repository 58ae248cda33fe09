import { envelopeOf } from '@stampeded/nestjs/internal';
import { esc } from './html.js';

/** "encrypted", with the key's id: what a list and a job page show of encrypted args. */
export function encryptedTag(keyId: unknown): string {
  return `<span class="tag encrypted">encrypted · key ${esc(keyId)}</span>`;
}

/**
 * Args or a result as stored: an encrypted one (docs/encryption.md) is said
 * to be, with its key, and its ciphertext is not shown; the dashboard holds
 * no keys.
 */
export function storedView(value: unknown): string {
  const envelope = envelopeOf(value);
  if (!envelope) return jsonView(value);
  return `<p>${encryptedTag(envelope.kid)} <span class="dim">readable only in a process that holds the key</span></p>`;
}

/** Past this many lines a JSON value starts folded, its size on the fold. */
const FOLD_LINES = 40;

/**
 * A JSON value on a job's page: pretty-printed and escaped; a large one
 * folded in a <details> (no script needed to open it) that says its size.
 */
export function jsonView(value: unknown): string {
  const text = JSON.stringify(value, null, 2) ?? 'null';
  const lines = text.split('\n').length;
  if (lines <= FOLD_LINES) return `<pre tabindex="0">${esc(text)}</pre>`;
  const size = Buffer.byteLength(text) >= 1024 ? `${(Buffer.byteLength(text) / 1024).toFixed(1)} KiB` : `${Buffer.byteLength(text)} bytes`;
  const count = Array.isArray(value) ? value.length : Object.keys(value as object).length;
  const kind = `${Array.isArray(value) ? 'an array of' : 'an object of'} ${count} ${Array.isArray(value) ? 'item' : 'key'}${count === 1 ? '' : 's'}`;
  return `<details class="json"><summary>${esc(`${kind}, ${lines} lines, ${size}: show`)}</summary><pre tabindex="0">${esc(text)}</pre></details>`;
}
