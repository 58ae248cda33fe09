import { seedDifferences, type CatalogFact } from './seed-adoption.js';

const table = (relation: string, detail = 'table'): CatalogFact => ({ kind: 'relation', relation, name: null, position: null, detail });
const column = (relation: string, name: string, position: number, detail = 'text'): CatalogFact => ({ kind: 'column', relation, name, position, detail });
const fn = (name: string, detail: string): CatalogFact => ({ kind: 'function', relation: null, name, position: null, detail });
const body = (name: string, detail: string): CatalogFact => ({ kind: 'function body', relation: null, name, position: null, detail });
const trigger = (relation: string, name: string, detail: string): CatalogFact => ({ kind: 'trigger', relation, name, position: null, detail });

const SEED: CatalogFact[] = [
  table('stampeded_jobs', 'partitioned table by LIST (queue)'),
  column('stampeded_jobs', 'id', 1, 'uuid NOT NULL'),
  column('stampeded_jobs', 'queue', 2, 'text NOT NULL'),
  column('stampeded_jobs', 'task', 3, 'text NOT NULL'),
  table('stampeded_workers'),
  column('stampeded_workers', 'id', 1, 'uuid NOT NULL'),
  fn('stampeded_touch(p_id uuid)', 'function (p_id uuid) RETURNS boolean LANGUAGE sql VOLATILE'),
  body('stampeded_touch(p_id uuid)', 'UPDATE ...'),
  table('stampeded_jobs_stampeded_seed_reference', "table, partition of stampeded_jobs FOR VALUES IN ('stampeded_seed_reference')"),
  trigger('stampeded_jobs_stampeded_seed_reference', 'stampeded_count_ins_trg', 'AFTER INSERT ...'),
];

describe('seedDifferences', () => {
  it('finds none between the seed and itself, whatever its queues are called', () => {
    const mail = [
      table('stampeded_jobs_mail', "table, partition of stampeded_jobs FOR VALUES IN ('mail')"),
      trigger('stampeded_jobs_mail', 'stampeded_count_ins_trg', 'AFTER INSERT ...'),
    ];
    expect(seedDifferences(SEED, [...SEED.slice(0, 8), ...mail])).toEqual([]);
  });

  it('names what is missing, changed and extra, once per table or function', () => {
    const found = [
      table('stampeded_jobs', 'partitioned table by LIST (queue)'),
      column('stampeded_jobs', 'id', 1, 'uuid NOT NULL'),
      column('stampeded_jobs', 'queue', 2, 'text'),
      column('stampeded_jobs', 'note', 4),
      fn('stampeded_touch(p_id uuid)', 'function (p_id uuid) RETURNS boolean LANGUAGE sql VOLATILE'),
      body('stampeded_touch(p_id uuid)', 'SELECT true'),
      table('stampeded_orders_log'),
      column('stampeded_orders_log', 'id', 1),
    ];
    expect(seedDifferences(SEED, found)).toEqual([
      "column stampeded_jobs.queue: differs (the seed's: text NOT NULL; found: text)",
      "column stampeded_jobs.task: missing (the seed's: text NOT NULL)",
      "table stampeded_workers: missing (the seed's: table)",
      "function stampeded_touch(p_id uuid): its body differs from the seed's",
      'column stampeded_jobs.note: not in the seed (text)',
      'table stampeded_orders_log: not in the seed (table)',
    ]);
  });

  it('names a column order that is not the seed’s', () => {
    const found = SEED.map((f) => (f.kind === 'column' && f.relation === 'stampeded_jobs' ? { ...f, position: 4 - f.position! } : f));
    expect(seedDifferences(SEED, found)).toEqual(["table stampeded_jobs: columns in another order (the seed's: id, queue, task; found: task, queue, id)"]);
  });

  it("compares each queue's partition with the one the seed's stampeded_create_queue makes", () => {
    const found = [
      ...SEED.slice(0, 8),
      table('stampeded_jobs_mail', "table, partition of stampeded_jobs FOR VALUES IN ('mail')"),
      table('stampeded_jobs_sms', "table, partition of stampeded_jobs FOR VALUES IN ('sms')"),
      trigger('stampeded_jobs_sms', 'stampeded_count_ins_trg', 'AFTER INSERT ...'),
      trigger('stampeded_jobs_sms', 'audit', 'AFTER UPDATE ...'),
    ];
    expect(seedDifferences(SEED, found)).toEqual([
      "queue partition stampeded_jobs_mail: trigger stampeded_count_ins_trg: missing (the seed's: AFTER INSERT ...)",
      'queue partition stampeded_jobs_sms: trigger audit: not in the seed (AFTER UPDATE ...)',
    ]);
  });
});
