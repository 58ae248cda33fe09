import { attemptTimeline } from './attempt-timeline.js';

const t = (secs: number) => new Date(Date.UTC(2026, 0, 1, 10, 0, secs)).toISOString();
const entry = (attempt: number, kind: string, started: number, ended: number, worker = 'w1') => ({
  attempt,
  kind,
  message: `${kind} at ${ended}`,
  at: t(ended),
  started_at: t(started),
  worker,
});

describe('attemptTimeline', () => {
  it('names each recorded attempt by its kind: a failure, an interruption, a deferral, and the completion that follows', () => {
    const timeline = attemptTimeline({
      state: 'completed',
      inserted_at: t(0),
      claimed_at: t(30),
      finished_at: t(31),
      attempt: 3,
      attempted_by: ['w1', 'w2', 'w3', 'w4'],
      errors: [entry(1, 'raised', 1, 2, 'w1'), entry(2, 'worker_missing', 5, 20, 'w2'), entry(3, 'breaker_open', 22, 22, 'w3')],
    });
    expect(timeline.spans.map((s) => [s.attempt, s.outcome, s.worker, s.durationMs])).toEqual([
      [1, 'failed', 'w1', 1000],
      [2, 'interrupted', 'w2', 15000],
      [3, 'deferred', 'w3', 0],
      [3, 'completed', 'w4', 1000],
    ]);
    expect(timeline.until.toISOString()).toBe(t(31));
    expect(timeline.dueAt).toBeNull();
  });

  it('draws a running attempt up to now, and a waiting job up to now with when it is due', () => {
    const now = new Date(t(50));
    const running = attemptTimeline({ state: 'executing', inserted_at: t(0), claimed_at: t(40), claimed_by: 'w9', attempt: 1, errors: [] }, now);
    expect(running.spans).toEqual([expect.objectContaining({ outcome: 'running', worker: 'w9', durationMs: 10_000 })]);
    const waiting = attemptTimeline({ state: 'retryable', inserted_at: t(0), scheduled_at: t(60), attempt: 1, errors: [entry(1, 'raised', 1, 2)] }, now);
    expect(waiting.until).toEqual(now);
    expect(waiting.dueAt?.toISOString()).toBe(t(60));
  });

  it('ends a cancelled job with the cancel, and keeps entries older versions recorded without a start or worker', () => {
    const timeline = attemptTimeline({
      state: 'cancelled',
      inserted_at: t(0),
      finished_at: t(9),
      failure_kind: 'cancelled',
      attempt: 1,
      errors: [{ attempt: 1, kind: 'raised', message: 'boom', at: t(3) }],
    });
    expect(timeline.spans.map((s) => [s.outcome, s.startedAt, s.durationMs])).toEqual([
      ['failed', null, null],
      ['cancelled', null, null],
    ]);
  });
});
