import { decideVerdict, type QueueFacts } from './queue-verdict.js';

const facts = (over: Partial<QueueFacts> = {}): QueueFacts => ({
  queue: 'q',
  maxRunning: null,
  maxWaitSecs: null,
  running: 0,
  headWaitSecs: null,
  paused: false,
  pausedBy: null,
  pauseReason: null,
  ...over,
});

describe('the queue verdict', () => {
  it('is steady with no policy, and says so', () => {
    expect(decideVerdict(facts({ running: 3, headWaitSecs: 2 }))).toEqual({
      verdict: 'steady',
      reason: 'steady: 3 running, head waited 2.0s',
    });
  });

  it('holds a queue at max_running, and rushes nothing over its cap', () => {
    const d = decideVerdict(facts({ maxRunning: 5, running: 5, maxWaitSecs: 1, headWaitSecs: 60 }));
    expect(d).toEqual({ verdict: 'hold', reason: 'max_running: 5 claimed or executing, cap 5' });
    expect(decideVerdict(facts({ maxRunning: 5, running: 4 })).verdict).toBe('steady');
  });

  it('rushes a queue whose head has waited longer than max_wait_secs', () => {
    expect(decideVerdict(facts({ maxWaitSecs: 30, headWaitSecs: 31 }))).toEqual({
      verdict: 'rush',
      reason: 'max_wait_secs: head waited 31.0s, more than 30s',
    });
    expect(decideVerdict(facts({ maxWaitSecs: 30, headWaitSecs: 30 })).verdict).toBe('steady');
    expect(decideVerdict(facts({ maxWaitSecs: 30, headWaitSecs: null })).verdict).toBe('steady');
  });

  it("keeps an operator's pause above everything, with the operator's reason", () => {
    const d = decideVerdict(facts({ paused: true, pausedBy: 'ana', pauseReason: 'deploy', maxWaitSecs: 1, headWaitSecs: 99 }));
    expect(d).toEqual({ verdict: 'hold', reason: 'paused by ana: deploy' });
  });
});
