import { UuidV7Source } from './uuidv7.js';

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const millis = (id: string) => parseInt(id.slice(0, 8) + id.slice(9, 13), 16);

describe('UuidV7Source', () => {
  it('draws version 7, RFC variant ids whose first 48 bits are the clock', () => {
    const at = Date.UTC(2026, 11, 2, 12, 0, 0, 123);
    const ids = new UuidV7Source(() => at).many(100);
    expect(ids.every((id) => V7.test(id))).toBe(true);
    expect(millis(ids[0])).toBe(at);
    expect(new Set(ids).size).toBe(100);
  });

  it('only grows: within a millisecond by the counter, past 4,096 by moving the timestamp on', () => {
    const source = new UuidV7Source(() => 1_000_000);
    const ids = [...source.many(5000), ...source.many(5000)];
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
    // 10,000 ids from one millisecond span a few following ones, no more.
    expect(millis(ids[0])).toBe(1_000_000);
    expect(millis(ids[ids.length - 1])).toBeLessThanOrEqual(1_000_000 + 3);
  });

  it('keeps growing when the clock steps back', () => {
    let now = 5_000_000;
    const source = new UuidV7Source(() => now);
    const before = source.many(3);
    now -= 60_000;
    const after = source.many(3);
    expect([...before, ...after].sort()).toEqual([...before, ...after]);
    now += 120_000;
    expect(millis(source.many(1)[0])).toBe(now);
  });

  it('draws its random bits in blocks and hands each out once: one id at a time across many blocks', () => {
    const source = new UuidV7Source(() => 7);
    const ids = Array.from({ length: 3000 }, () => source.many(1)[0]);
    expect(new Set(ids).size).toBe(3000);
    expect([...ids].sort()).toEqual(ids);
    // The random parts too: no block was handed out twice.
    expect(new Set(ids.map((id) => id.slice(19))).size).toBe(3000);
  });

  it('leaves 62 bits to chance: two sources on one clock never meet', () => {
    const a = new UuidV7Source(() => 42).many(2000);
    const b = new UuidV7Source(() => 42).many(2000);
    const all = new Set([...a, ...b]);
    expect(all.size).toBe(4000);
  });
});
