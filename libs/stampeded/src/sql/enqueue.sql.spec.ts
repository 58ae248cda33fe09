import { ENQUEUE, ENQUEUE_KEYED, ENQUEUE_ONE, ENQUEUE_ONE_KEYS, ENQUEUE_PLAIN, ENQUEUE_PLAIN_KEYED } from './enqueue.sql.js';
import { ENQUEUE_WORKFLOW } from './workflows.sql.js';
import { JOB_COLUMNS } from '../queue/job-columns.js';

/** The column list of a statement's INSERT INTO stampeded_jobs (...). */
function insertedColumns(text: string): string[] {
  const match = /INSERT INTO stampeded_jobs \(([^)]*)\)/.exec(text);
  if (!match) throw new Error(`no insert into stampeded_jobs in: ${text.slice(0, 80)}`);
  return match[1].split(',').map((c) => c.trim());
}

const stored = JOB_COLUMNS.filter((c) => c.stored === 'column').map((c) => c.column);
const dedup = JOB_COLUMNS.filter((c) => c.stored === 'dedup').map((c) => c.column);
const derived = ['id', 'scheduled_at', 'ordering_position'];

describe('the enqueue statements, made from JOB_COLUMNS', () => {
  it.each([
    ['ENQUEUE_ONE', ENQUEUE_ONE.text, []],
    ['ENQUEUE_PLAIN', ENQUEUE_PLAIN.text, []],
    ['ENQUEUE_PLAIN_KEYED', ENQUEUE_PLAIN_KEYED.text, ['state']],
    ['ENQUEUE', ENQUEUE.text, dedup],
    ['ENQUEUE_KEYED', ENQUEUE_KEYED.text, [...dedup, 'state']],
    ['ENQUEUE_WORKFLOW', ENQUEUE_WORKFLOW.text, ['state', 'workflow_id', 'deps_pending']],
  ])('%s inserts every stored job column once, and no input-only one', (_name, text, own) => {
    const columns = insertedColumns(text);
    expect([...columns].sort()).toEqual([...stored, ...derived, ...own].sort());
    expect(new Set(columns).size).toBe(columns.length);
  });

  it("reads every job column from the batch's JSON, typed as the table says", () => {
    for (const { column, type } of JOB_COLUMNS) expect(ENQUEUE_PLAIN.text).toContain(`${column} ${type}`);
  });

  it('gives ENQUEUE_ONE one parameter a column of ENQUEUE_ONE_KEYS, after the id, each used', () => {
    expect(ENQUEUE_ONE_KEYS).toEqual(JOB_COLUMNS.filter((c) => c.stored !== 'dedup').map((c) => c.column));
    const used = new Set([...ENQUEUE_ONE.text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
    expect([...used].sort((a, b) => a - b)).toEqual(Array.from({ length: ENQUEUE_ONE_KEYS.length + 1 }, (_, i) => i + 1));
    // runAt and delayMs are read into scheduled_at, typed for the expression that reads them.
    expect(ENQUEUE_ONE.text).toContain(`$${ENQUEUE_ONE_KEYS.indexOf('run_at') + 2}::timestamptz`);
  });
});
