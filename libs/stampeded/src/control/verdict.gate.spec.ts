import { obeyedVerdict, queueRoom, toQueueView, VerdictGate, type VerdictRow } from './verdict.gate.js';

const row = (over: Partial<VerdictRow> = {}): VerdictRow => ({
  queue: 'q',
  verdict: 'steady',
  paused: false,
  fresh: true,
  decided_at: new Date(0),
  max_running: null,
  ...over,
});

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

  it('leaves the pause to its own column: a paused queue has no room however old its verdict is', () => {
    expect(obeyedVerdict(row({ verdict: 'steady', paused: true, fresh: false, decided_at: null }))).toBe('steady');
    expect(queueRoom(toQueueView(row({ verdict: 'steady', paused: true, fresh: false, decided_at: null })))).toBe(0);
  });

  it('carries the pause and the cap into the view', () => {
    expect(toQueueView(row({ max_running: 5 }))).toEqual({ verdict: 'steady', paused: false, maxRunning: 5 });
    expect(toQueueView(row({ paused: null }))).toMatchObject({ paused: false, maxRunning: null });
  });
});

describe('room in a queue', () => {
  it('is none while paused, or held with no cap (a hold whose cap was just lifted)', () => {
    expect(queueRoom({ paused: true, verdict: 'hold', maxRunning: 5 })).toBe(0);
    expect(queueRoom({ paused: true, verdict: 'steady', maxRunning: null })).toBe(0);
    expect(queueRoom({ paused: false, verdict: 'hold', maxRunning: null })).toBe(0);
  });

  it('is unlimited otherwise: a capped queue is held by its claim, which counts the fleet under a lock', () => {
    expect(queueRoom({ paused: false, verdict: 'hold', maxRunning: 5 })).toBe(Infinity);
    expect(queueRoom({ paused: false, verdict: 'rush', maxRunning: null })).toBe(Infinity);
    expect(queueRoom({ paused: false, verdict: 'steady', maxRunning: 5 })).toBe(Infinity);
  });
});

describe('VerdictGate', () => {
  it('claims from nothing of a paused queue and counts it as capped', () => {
    const gate = new VerdictGate();
    gate.apply([row({ queue: 'a', paused: true, verdict: 'hold' }), row({ queue: 'b' })]);
    expect(gate.room('a')).toBe(0);
    expect(gate.counted('a')).toBe(true);
    expect(gate.room('b')).toBe(Infinity);
    expect(gate.counted('b')).toBe(false);
    expect(gate.room('unknown')).toBe(Infinity);
  });

  it('lists the rushed queues in the order asked', () => {
    const gate = new VerdictGate();
    expect(gate.rushed(['a'])).toEqual([]);
    gate.apply([row({ queue: 'a', verdict: 'rush' }), row({ queue: 'b' }), row({ queue: 'c', verdict: 'rush' })]);
    expect(gate.rushed(['c', 'b', 'a', 'd'])).toEqual(['c', 'a']);
  });

  it('tells a capped queue, claimed through the limited claim, from a plain one', () => {
    const gate = new VerdictGate();
    gate.apply([row({ queue: 'a', max_running: 3 }), row({ queue: 'b' })]);
    expect(gate.capped('a')).toBe(true);
    expect(gate.counted('a')).toBe(true);
    expect(gate.capped('b')).toBe(false);
    expect(gate.capped('unknown')).toBe(false);
    gate.apply([row({ queue: 'a' })]);
    expect(gate.capped('a')).toBe(false);
  });
});
