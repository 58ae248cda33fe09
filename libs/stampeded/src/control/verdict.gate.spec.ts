import type { Job } from '../interfaces/job.interface.js';
import { AWAITING_OUTCOME_TIMEOUT_MS, cappedRoom, obeyedVerdict, toQueueView, uncappedRoom, VerdictGate, type VerdictRow } from './verdict.gate.js';

const row = (over: Partial<VerdictRow> = {}): VerdictRow => ({
  queue: 'q',
  verdict: 'steady',
  paused: false,
  fresh: true,
  decided_at: new Date(0),
  max_running: null,
  live_running: null,
  workers: 1,
  ...over,
});

const job = (id: string, queue = 'q') => ({ id, queue, tenantId: null, destination: null }) as Job;

describe('the verdict a worker obeys', () => {
  it('is the planner’s while fresh', () => {
    expect(obeyedVerdict(row({ verdict: 'rush' }))).toBe('rush');
    expect(obeyedVerdict(row({ verdict: 'hold' }))).toBe('hold');
  });

  it('is steady once stale or never decided, so a dead planner degrades to round robin', () => {
    expect(obeyedVerdict(row({ verdict: 'hold', fresh: false }))).toBe('steady');
    expect(obeyedVerdict(row({ verdict: 'rush', fresh: null }))).toBe('steady');
    expect(obeyedVerdict(row({ verdict: 'rush', decided_at: null }))).toBe('steady');
  });

  it('is hold for an operator’s pause however old it is', () => {
    expect(obeyedVerdict(row({ verdict: 'steady', paused: true, fresh: false, decided_at: null }))).toBe('hold');
  });

  it('counts at least one worker on a queue, and reads a count the database sent as text', () => {
    expect(toQueueView(row({ workers: 0 }), undefined).workers).toBe(1);
    expect(toQueueView(row({ workers: null }), undefined).workers).toBe(1);
    expect(toQueueView(row({ workers: '3' }), 2)).toMatchObject({ workers: 3, baseline: 2, paused: false });
  });
});

describe('room in a queue', () => {
  it('is none while paused or held, and unlimited otherwise', () => {
    expect(uncappedRoom({ paused: true, verdict: 'hold' })).toBe(0);
    expect(uncappedRoom({ paused: false, verdict: 'hold' })).toBe(0);
    expect(uncappedRoom({ paused: false, verdict: 'rush' })).toBe(Infinity);
    expect(uncappedRoom({ paused: false, verdict: 'steady' })).toBe(Infinity);
  });

  it('splits the free room under max_running between the live workers, rounding up', () => {
    // 10 cap, 4 running, 3 workers: 6 free, 2 each.
    expect(cappedRoom(10, 4, 3, 0, 0)).toBe(2);
    // 7 free between 3 workers: 3 each (soft: the overshoot is documented).
    expect(cappedRoom(10, 3, 3, 0, 0)).toBe(3);
  });

  it('adds the worker’s own jobs at the read and takes off those it holds now', () => {
    // It held 2 when 8 ran of 10; alone, it may hold 4, so with 3 now it has room for 1.
    expect(cappedRoom(10, 8, 1, 2, 3)).toBe(1);
    expect(cappedRoom(10, 8, 1, 2, 4)).toBe(0);
  });

  it('over the cap, gives up each worker’s part of the excess and is never negative', () => {
    // 3 over between 2 workers: each gives up 2.
    expect(cappedRoom(5, 8, 2, 4, 2)).toBe(0);
    expect(cappedRoom(5, 8, 2, 4, 1)).toBe(1);
    expect(cappedRoom(5, 8, 2, 0, 3)).toBe(0);
  });
});

describe('VerdictGate', () => {
  it('claims from nothing of a paused queue and counts it as capped', () => {
    const gate = new VerdictGate();
    gate.apply([row({ queue: 'a', paused: true, verdict: 'hold' }), row({ queue: 'b' })]);
    expect(gate.room('a', () => 0)).toBe(0);
    expect(gate.capped('a')).toBe(true);
    expect(gate.room('b', () => 0)).toBe(Infinity);
    expect(gate.capped('b')).toBe(false);
    expect(gate.room('unknown', () => 0)).toBe(Infinity);
  });

  it('lists the rushed queues in the order asked', () => {
    const gate = new VerdictGate();
    expect(gate.rushed(['a'])).toEqual([]);
    gate.apply([row({ queue: 'a', verdict: 'rush' }), row({ queue: 'b' }), row({ queue: 'c', verdict: 'rush' })]);
    expect(gate.rushed(['c', 'b', 'a', 'd'])).toEqual(['c', 'a']);
  });

  it('keeps counting a settled job of a capped queue until its outcome is written, or for a while', () => {
    const gate = new VerdictGate();
    let inFlight = 2;
    gate.apply([row({ max_running: 4, live_running: 2 })], 0);
    expect(gate.room('q', () => inFlight)).toBe(2); // baseline 2, 2 free
    inFlight = 1;
    gate.settled(job('j1'), 0);
    expect(gate.room('q', () => inFlight)).toBe(2); // the settled job still counts: 1 + 1
    gate.recorded(job('j1'));
    expect(gate.room('q', () => inFlight)).toBe(3);

    gate.settled(job('j2'), 0);
    gate.apply([row({ max_running: 4, live_running: 2 })], AWAITING_OUTCOME_TIMEOUT_MS + 1);
    // The new baseline counted j2 (read before it expired); afterwards it no longer counts.
    expect(gate.room('q', () => inFlight)).toBe(3);
  });
});
