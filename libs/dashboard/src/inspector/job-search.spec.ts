import { InspectorInputError } from './inspector-input.js';
import { searchFilters } from './job-search.js';
import { isBoundedScan, listJobsQuery } from '../sql/job-list.sql.js';

describe('the jobs search', () => {
  it('reads a whole id as the id, and a tail as the end of one', () => {
    expect(searchFilters({ id: '01A2496A-FDC5-70D2-A03B-E02E15FF571A' })).toEqual({ id: '01a2496a-fdc5-70d2-a03b-e02e15ff571a' });
    expect(searchFilters({ id: '…e02e15ff571a' })).toEqual({ idTail: 'e02e15ff571a' });
    expect(() => searchFilters({ id: 'abc' })).toThrow(InspectorInputError);
    expect(() => searchFilters({ id: 'not-an-id!' })).toThrow(/its last characters as the jobs list shows them/);
  });

  it('takes a fingerprint prefix of 8 hex digits or more, and args or meta as a JSON object', () => {
    expect(searchFilters({ fingerprint: 'F31C70BDC00E' })).toEqual({ fingerprint: 'f31c70bdc00e' });
    expect(() => searchFilters({ fingerprint: 'f31c' })).toThrow(/first 8 to 64 hex digits/);
    expect(searchFilters({ args: ' {"orderId": 42} ', meta: '{}' })).toEqual({ args: '{"orderId":42}', meta: '{}' });
    expect(() => searchFilters({ args: '[42]' })).toThrow(/must be a JSON object/);
    expect(() => searchFilters({ meta: '{orderId: 42}' })).toThrow(/such as \{"orderId": 42\}/);
  });

  it('bounds every search no index serves, within its queue when it has one', () => {
    expect(isBoundedScan({ args: '{}' })).toBe(true);
    expect(isBoundedScan({ args: '{}', queue: 'emails' })).toBe(true);
    expect(isBoundedScan({ idTail: 'abcd', state: 'completed' })).toBe(true);
    expect(isBoundedScan({ task: 'send', queue: 'emails' })).toBe(false);
    expect(isBoundedScan({ meta: '{}', tenant: 't1' })).toBe(false);
    expect(isBoundedScan({ fingerprint: 'abcdef12', task: 'send' })).toBe(false);
    expect(isBoundedScan({ fingerprint: 'abcdef12', state: 'completed' })).toBe(true);
    expect(isBoundedScan({ id: '01a2496a-fdc5-70d2-a03b-e02e15ff571a' })).toBe(false);
    const { statement, values } = listJobsQuery({ queue: 'emails', args: '{"orderId":42}' }, 51, 1000);
    expect(statement.text).toMatch(/WHERE j\.queue = \$3\s+ORDER BY j\.id DESC\s+LIMIT \$1/);
    expect(values).toEqual([1000, 51, 'emails', '{"orderId":42}']);
  });
});
