import { BAD_CURSOR } from '../dashboard.messages.js';
import { InspectorInputError, isUuid } from './inspector-input.js';

/** Where a page ended: its last job, and, for a listing in fingerprint order, that job's fingerprint (hex). */
export interface JobCursor {
  queue: string;
  id: string;
  fingerprint?: string;
}

/** A page's cursor: the last job it showed, as opaque text for a URL. */
export function encodeCursor(queue: string, id: string, fingerprint?: string): string {
  return Buffer.from(JSON.stringify(fingerprint ? [queue, id, fingerprint] : [queue, id])).toString('base64url');
}

/** The job a cursor names, or the one error for every cursor this dashboard did not write. */
export function decodeCursor(cursor: string): JobCursor {
  try {
    const [queue, id, fingerprint] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (typeof queue === 'string' && isUuid(id)) {
      if (fingerprint === undefined) return { queue, id };
      if (typeof fingerprint === 'string' && /^[0-9a-f]{64}$/.test(fingerprint)) return { queue, id, fingerprint };
    }
  } catch {
    // fall through to the one error below
  }
  throw new InspectorInputError(BAD_CURSOR());
}
