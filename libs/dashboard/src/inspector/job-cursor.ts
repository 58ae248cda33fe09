import { BAD_CURSOR } from '../dashboard.messages.js';
import { InspectorInputError, isUuid } from './inspector-input.js';

/** A page's cursor: the last job it showed, as opaque text for a URL. */
export function encodeCursor(queue: string, id: string): string {
  return Buffer.from(JSON.stringify([queue, id])).toString('base64url');
}

/** The job a cursor names, or the one error for every cursor this dashboard did not write. */
export function decodeCursor(cursor: string): { queue: string; id: string } {
  try {
    const [queue, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (typeof queue === 'string' && isUuid(id)) return { queue, id };
  } catch {
    // fall through to the one error below
  }
  throw new InspectorInputError(BAD_CURSOR());
}
