import type { Job } from '../interfaces/job.interface.js';
import { completionArrays } from './outcome-recorder.js';

const job = (id: string, queue = 'q', attempt = 1) => ({ id, queue, attempt }) as Job;

describe('completionArrays', () => {
  it('sends no results array when no job of the batch has a result', () => {
    expect(completionArrays([{ job: job('a') }, { job: job('b'), result: null }])).toEqual(['{"q","q"}', '{a,b}', '{1,1}', null]);
  });

  it("puts each result at its job's place, NULL where a job has none", () => {
    const [, ids, , results] = completionArrays([
      { job: job('a'), result: null },
      { job: job('b'), result: '{"n":2}' },
      { job: job('c') },
      { job: job('d'), result: '4' },
    ]);
    expect(ids).toBe('{a,b,c,d}');
    expect(results).toBe('{NULL,"{\\"n\\":2}",NULL,"4"}');
  });

  it('escapes the quotes and backslashes of a result, and nothing else', () => {
    const text = JSON.stringify({ s: 'say "hi", {braces} \\ back\nslash', u: 'é😀' });
    const [, , , results] = completionArrays([{ job: job('a'), result: text }]);
    expect(results).toBe(`{"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"}`);
  });

  it('quotes a queue once per batch', () => {
    const [queues] = completionArrays([{ job: job('a', 'e"mails') }, { job: job('b', 'e"mails') }, { job: job('c', 'other') }]);
    expect(queues).toBe('{"e\\"mails","e\\"mails","other"}');
  });
});
