import { randomUUID } from 'node:crypto';
import { Subject } from 'rxjs';
import { FINISHED_OR_GONE, GET_JOB } from '../sql/jobs.sql.js';
import type { Statement } from '../sql/statement.js';
import type { StampededDatabase } from '../database/stampeded-database.js';
import type { JobEvents } from './job-events.js';
import type { JobEvent } from '../interfaces/job-event.interface.js';
import { JobWaiters } from './job-waiters.js';
import { JobEncryption } from '../encryption/job-encryption.js';

/** A database that answers the waiters' two statements from a map of job states, and counts what it is asked. */
function fakeDatabase(states: Map<string, string>) {
  const calls: { statement: Statement; values: unknown[] }[] = [];
  const stored = (id: string) => ({ id, queue: 'q', task: 't', state: states.get(id), args: {}, meta: {}, errors: [], dedup_scope: null });
  const db = {
    canListen: true,
    async query(statement: Statement, values: unknown[]) {
      calls.push({ statement, values });
      if (statement === GET_JOB) return states.has(values[0] as string) ? [stored(values[0] as string)] : [];
      if (statement === FINISHED_OR_GONE) {
        return (values[1] as string[]).flatMap((id): Record<string, unknown>[] => {
          if (!states.has(id)) return [{ waited_id: id, id: null }];
          return ['completed', 'discarded', 'cancelled'].includes(states.get(id)!) ? [{ waited_id: id, ...stored(id) }] : [];
        });
      }
      throw new Error(`unexpected statement ${statement.name}`);
    },
  };
  return { db: db as unknown as StampededDatabase, calls };
}

function fakeEvents() {
  const events$ = new Subject<JobEvent>();
  const reconnected$ = new Subject<void>();
  return { events: { events$, reconnected$, listenToFleet: async () => {} } as unknown as JobEvents, events$, reconnected$ };
}

const settled = () => new Promise((r) => setImmediate(r));

describe('JobWaiters', () => {
  let waiters: JobWaiters;
  afterEach(() => waiters?.shutdown());

  it('reads every pending wait in one statement at a re-check, and the jobs events name in one statement a turn', async () => {
    const ids = Array.from({ length: 300 }, () => randomUUID());
    const states = new Map(ids.map((id) => [id, 'executing']));
    const { db, calls } = fakeDatabase(states);
    const { events, events$ } = fakeEvents();
    waiters = new JobWaiters(db, events, new JobEncryption({}, new Map()));
    waiters.recheckEveryMs = 60_000;
    // Those still pending at the end are ended by the shutdown in afterEach.
    const waits = ids.map((id) => waiters.wait({ id }).catch((e: unknown) => e as { state?: string }));
    await settled();
    expect(waiters.pending).toBe(300);
    // One read each when they start, so that a job finished already resolves at once.
    expect(calls.filter((c) => c.statement === GET_JOB)).toHaveLength(300);
    calls.length = 0;

    await waiters.recheck();
    expect(calls).toHaveLength(1);
    expect(calls[0].statement).toBe(FINISHED_OR_GONE);
    expect(calls[0].values[1]).toHaveLength(300);

    calls.length = 0;
    const finished = ids.slice(0, 50);
    for (const id of finished) states.set(id, 'completed');
    for (const id of finished) events$.next({ origin: 'fleet', type: 'completed', jobId: id, queue: 'q', task: 't', attempt: 1, workerId: null });
    await settled();
    await settled();
    expect(calls).toHaveLength(1);
    expect(calls[0].values[1]).toEqual(finished);
    expect((await Promise.all(waits.slice(0, 50))).map((j) => j.state)).toEqual(finished.map(() => 'completed'));
    expect(waiters.pending).toBe(250);

    // A retry is not an end: nothing is read for it.
    calls.length = 0;
    events$.next({ origin: 'fleet', type: 'retrying', jobId: ids[60], queue: 'q', task: 't', attempt: 1, workerId: null });
    await settled();
    expect(calls).toHaveLength(0);
  });

  it('ends a wait whose job is gone, and every wait of a job at once', async () => {
    const id = randomUUID();
    const states = new Map([[id, 'available']]);
    const { db } = fakeDatabase(states);
    const { events, reconnected$ } = fakeEvents();
    waiters = new JobWaiters(db, events, new JobEncryption({}, new Map()));
    const first = waiters.wait({ id }).catch((e: unknown) => e);
    const second = waiters.wait({ id }).catch((e: unknown) => e);
    await settled();
    expect(waiters.pending).toBe(2);
    states.delete(id);
    // A reconnected listener missed what was sent meanwhile: everything is read again.
    reconnected$.next();
    expect(await first).toMatchObject({ name: 'JobWaitError', reason: 'removed', jobId: id });
    expect(await second).toMatchObject({ name: 'JobWaitError', reason: 'removed', jobId: id });
    expect(waiters.pending).toBe(0);
  });
});
