import { buildJobRow } from './job-input.validator.js';
import { rowsToJson, rowToParameters } from './job-row.serializer.js';
import { ENQUEUE_ONE_KEYS } from '../sql/enqueue.sql.js';
import type { JobColumnDefaults } from './job-column-defaults.js';
import type { EnqueueOptions } from '../interfaces/job-options.interface.js';

const COLUMNS: JobColumnDefaults = {
  priority: 0,
  expireSeconds: 300,
  maxAttempts: 25,
  backoffBaseMs: 1000,
  backoffMaxMs: 3_600_000,
  maxInterruptions: 3,
  maxDeferrals: 100,
};
const row = (task: string, args: object, options: EnqueueOptions = {}) => buildJobRow('enqueue()', task, args, options, [], COLUMNS);

describe('rowsToJson', () => {
  it('writes what every row shares once, what differs per row, and leaves NULL columns out', () => {
    const [own, shared] = rowsToJson([row('send', { n: 1 }), row('send', { n: 2 }, { priority: 5 })]);
    expect(JSON.parse(own)).toEqual([
      { args: { n: 1 }, priority: 0 },
      { args: { n: 2 }, priority: 5 },
    ]);
    const common = JSON.parse(shared);
    expect(common).toMatchObject({ meta: {}, queue: 'default', task: 'send', max_attempts: 25, remove_on_complete: false });
    expect(Object.keys(common)).not.toContain('tenant_id');
    expect(Object.keys(common)).not.toContain('ordering_key');
  });

  it('splices args and meta in as the JSON they are, and quotes text', () => {
    const [own, shared] = rowsToJson([row('a "quoted" task', { text: 'x"y' }, { meta: { trace: 1 } })]);
    expect(JSON.parse(own)).toEqual([{}]);
    expect(JSON.parse(shared)).toMatchObject({ args: { text: 'x"y' }, meta: { nestjs: { trace: 1 } }, task: 'a "quoted" task' });
  });

  it("puts each row's id first, then a statement's own members", () => {
    const [own] = rowsToJson([row('send', {}), row('send', {})], ['id-1', 'id-2'], ['"step":"a"', '"step":"b"']);
    expect(JSON.parse(own)).toEqual([
      { id: 'id-1', step: 'a' },
      { id: 'id-2', step: 'b' },
    ]);
  });
});

describe('rowToParameters', () => {
  it("gives ENQUEUE_ONE the id, then the row's values in ENQUEUE_ONE_KEYS order", () => {
    const job = row('send', { n: 1 }, { tenantId: 't', delayMs: 10 });
    const values = rowToParameters(job, 'the-id');
    expect(values[0]).toBe('the-id');
    expect(values.slice(1)).toEqual(ENQUEUE_ONE_KEYS.map((key) => job[key]));
    expect(values).toContain('t');
  });
});
