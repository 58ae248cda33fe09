import { InspectorInputError } from './inspector-input.js';
import { decodeCursor, encodeCursor } from './job-cursor.js';

const ID = '0199a000-0000-7000-8000-0000000000aa';
const BAD_CURSOR = new InspectorInputError('The page cursor is not one this dashboard wrote: start again from the first page.');

describe('page cursors', () => {
  it.each(['default', 'mail.outbound:eu-west_1', 'q'.repeat(48), 'ünïcode "quoted" \\ queue'])('round-trip the queue %j and the job id', (queue) => {
    expect(decodeCursor(encodeCursor(queue, ID))).toEqual({ queue, id: ID });
  });

  it('are URL-safe text: no +, / or = to escape in a query string', () => {
    const cursor = encodeCursor('q?>?>?>', ID);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
  });

  it('accept an id in capitals, as a UUID may be written', () => {
    expect(decodeCursor(encodeCursor('q', ID.toUpperCase()))).toEqual({ queue: 'q', id: ID.toUpperCase() });
  });

  const encoded = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

  it.each([
    ['empty', ''],
    ['not base64 of JSON', 'not-a-cursor'],
    ['an id that is not a UUID', encoded(['q', '42'])],
    ['a queue that is not a string', encoded([7, ID])],
    ['an object, not a pair', encoded({ queue: 'q', id: ID })],
    ['JSON null', encoded(null)],
  ])('refuse %s with the one error that says to start again', (_what, cursor) => {
    expect(() => decodeCursor(cursor)).toThrow(BAD_CURSOR);
    expect(() => decodeCursor(cursor)).toThrow(InspectorInputError);
  });

  it('carry the last job fingerprint for a listing in fingerprint order', () => {
    const fingerprint = 'ab'.repeat(32);
    expect(decodeCursor(encodeCursor('q', ID, fingerprint))).toEqual({ queue: 'q', id: ID, fingerprint });
    expect(() => decodeCursor(Buffer.from(JSON.stringify(['q', ID, 'not hex'])).toString('base64url'))).toThrow(BAD_CURSOR);
  });
});
