import { esc } from './html.js';

/** A length of time as people say it: 42 ms, 4.2 s, 3 min 12 s, 2 h 5 min, 3 d 4 h. */
export function durationText(ms: number): string {
  const abs = Math.abs(ms);
  if (abs < 1000) return `${Math.round(abs)} ms`;
  const secs = abs / 1000;
  if (secs < 10) return `${secs.toFixed(1)} s`;
  if (secs < 60) return `${Math.floor(secs)} s`;
  const split = (big: number, small: number, bigUnit: string, smallUnit: string) => (small ? `${big} ${bigUnit} ${small} ${smallUnit}` : `${big} ${bigUnit}`);
  if (secs < 3600) return split(Math.floor(secs / 60), Math.floor(secs % 60), 'min', 's');
  if (secs < 86_400) return split(Math.floor(secs / 3600), Math.floor((secs % 3600) / 60), 'h', 'min');
  return split(Math.floor(secs / 86_400), Math.floor((secs % 86_400) / 3600), 'd', 'h');
}

/** How far a moment is from `now`: "3 s ago", "in 2 min". */
export function relativeText(at: Date, now = Date.now()): string {
  const ms = at.getTime() - now;
  // Under a second either way reads as now: the page and the database keep separate clocks.
  if (Math.abs(ms) < 1000) return 'just now';
  // Whole seconds: a tenth of a second is noise in how long ago something was.
  const text = Math.abs(ms) < 60_000 ? `${Math.round(Math.abs(ms) / 1000)} s` : durationText(ms);
  return ms < 0 ? `${text} ago` : `in ${text}`;
}

/** A moment in a page: relative to when the page was made, the exact time in its datetime and its tooltip. */
export function timeView(value: unknown, now = Date.now()): string {
  if (value === null || value === undefined || value === '') return '<span class="dim">-</span>';
  const at = value instanceof Date ? value : new Date(String(value));
  if (Number.isNaN(at.getTime())) return esc(value);
  const iso = at.toISOString();
  return `<time datetime="${iso}" title="${iso}">${esc(relativeText(at, now))}</time>`;
}

/** Milliseconds between two moments, or null when either is missing. */
export function between(from: unknown, to: unknown): number | null {
  if (!from || !to) return null;
  return new Date(to as string).getTime() - new Date(from as string).getTime();
}

/**
 * Where a job is in time, as its row in a list says it: a finished job when
 * it finished and how long its last attempt ran (claim to finish), a running
 * one since when, a waiting one when it is due, a pending one since when it
 * waits. Each moment relative, its exact time in the tooltip.
 */
export function jobTimeView(job: Record<string, unknown>, now = Date.now()): string {
  const state = String(job.state);
  if (job.finished_at) {
    const ran = between(job.claimed_at, job.finished_at);
    return `${timeView(job.finished_at, now)}${ran !== null && ran >= 0 ? `, ran ${esc(durationText(ran))}` : ''}`;
  }
  if (state === 'claimed' || state === 'executing') return `started ${timeView(job.claimed_at, now)}`;
  if (state === 'pending') return `enqueued ${timeView(job.inserted_at, now)}`;
  return `due ${timeView(job.scheduled_at, now)}`;
}
