import type { Job } from '../interfaces/job.interface.js';
import { ClaimBuffer } from './claim-buffer.js';

const job = (id: string, queue: string, priority = 0, scheduledAt = 0) => ({ id, queue, priority, scheduledAt: new Date(scheduledAt), tenantId: null }) as Job;

const ids = (buffer: ClaimBuffer) => buffer.ids();

describe('ClaimBuffer', () => {
  it("sorts a claim's jobs into the claim index's order: priority, then scheduled_at", () => {
    const buffer = new ClaimBuffer();
    buffer.add('q', [job('late', 'q', 0, 20), job('low', 'q', 5, 0), job('early', 'q', 0, 10)]);
    expect(ids(buffer)).toEqual(['early', 'late', 'low']);
  });

  it('puts a later claim of better jobs before the buffered ones of their queue', () => {
    const buffer = new ClaimBuffer();
    buffer.add('q', [job('p5', 'q', 5)]);
    buffer.add('q', [job('p0', 'q', 0)]);
    expect(ids(buffer)).toEqual(['p0', 'p5']);
  });

  it("keeps the other queues' jobs in the places they held", () => {
    const buffer = new ClaimBuffer();
    buffer.add('a', [job('a1', 'a', 3)]);
    buffer.add('b', [job('b1', 'b', 9)]);
    buffer.add('a', [job('a2', 'a', 1)]);
    // a's jobs take a's places (first and third), best first; b keeps the second.
    expect(ids(buffer)).toEqual(['a2', 'b1', 'a1']);
    expect(buffer.countIn('a')).toBe(2);
    expect(buffer.countIn('b')).toBe(1);
  });

  it('keeps the claim order of ties', () => {
    const buffer = new ClaimBuffer();
    buffer.add('q', [job('first', 'q'), job('second', 'q'), job('third', 'q')]);
    expect(ids(buffer)).toEqual(['first', 'second', 'third']);
  });

  it('takes the first job a predicate accepts, or none', () => {
    const buffer = new ClaimBuffer();
    buffer.add('q', [job('1', 'q', 0), job('2', 'q', 1), job('3', 'q', 2)]);
    expect(buffer.takeFirst((j) => j.id !== '1')?.id).toBe('2');
    expect(buffer.takeFirst(() => false)).toBeUndefined();
    expect(buffer.takeFirst()?.id).toBe('1');
    expect(ids(buffer)).toEqual(['3']);
  });

  it('takes the startable job of the lowest rank, the first of those in buffer order', () => {
    const buffer = new ClaimBuffer();
    buffer.add('q', [job('1', 'q', 0), job('2', 'q', 1), job('3', 'q', 2), job('4', 'q', 3)]);
    const rank: Record<string, number> = { '1': 5, '2': 2, '3': 2, '4': 0 };
    expect(
      buffer.takeFirst(
        (j) => j.id !== '4',
        (j) => rank[j.id],
      )?.id,
    ).toBe('2');
    expect(buffer.takeFirst(undefined, (j) => rank[j.id])?.id).toBe('4');
    expect(ids(buffer)).toEqual(['1', '3']);
  });

  it('takes a job by id, and everything at once', () => {
    const buffer = new ClaimBuffer();
    buffer.add('q', [job('1', 'q', 0), job('2', 'q', 1)]);
    expect(buffer.take('2')?.id).toBe('2');
    expect(buffer.take('2')).toBeUndefined();
    buffer.add('r', [job('3', 'r')]);
    expect(buffer.takeAll().map((j) => j.id)).toEqual(['1', '3']);
    expect(buffer.length).toBe(0);
  });
});
