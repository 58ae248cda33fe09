import { durationText, relativeText, timeView } from './time.view.js';

describe('time as the dashboard shows it', () => {
  it('says a duration in the unit a person would', () => {
    expect(durationText(42)).toBe('42 ms');
    expect(durationText(4230)).toBe('4.2 s');
    expect(durationText(42_000)).toBe('42 s');
    expect(durationText(192_000)).toBe('3 min 12 s');
    expect(durationText(7_500_000)).toBe('2 h 5 min');
    expect(durationText(3 * 86_400_000 + 4 * 3_600_000)).toBe('3 d 4 h');
    expect(durationText(120_000)).toBe('2 min');
  });

  it('says a moment relative to now, either way', () => {
    const now = Date.UTC(2026, 0, 1, 12, 0, 0);
    expect(relativeText(new Date(now - 3000), now)).toBe('3 s ago');
    expect(relativeText(new Date(now + 120_000), now)).toBe('in 2 min');
    expect(relativeText(new Date(now - 200), now)).toBe('just now');
  });

  it('keeps the exact time in a <time> element and its tooltip', () => {
    const now = Date.UTC(2026, 0, 1, 12, 0, 0);
    expect(timeView(new Date(now - 45_000), now)).toBe('<time datetime="2026-01-01T11:59:15.000Z" title="2026-01-01T11:59:15.000Z">45 s ago</time>');
    expect(timeView(null)).toContain('-');
  });
});
