import type { AttemptOutcome, AttemptSpan, AttemptTimeline } from '../inspector/attempt-timeline.js';
import { esc, show, table } from './html.js';
import { durationText, timeView } from './time.view.js';

const OUTCOME_WORDS: Record<AttemptOutcome, string> = {
  running: 'running',
  completed: 'completed',
  failed: 'failed',
  interrupted: 'interrupted: its worker went away',
  deferred: 'deferred: not run, the attempt given back',
  cancelled: 'cancelled',
  discarded: 'discarded by an operator',
};

const shortWorker = (id: string | null) => (id ? `<code title="${esc(id)}">${esc(id.length > 13 ? `…${id.slice(-12)}` : id)}</code>` : show(null));
const firstLine = (text: string | null) => (text ?? '').split('\n')[0];

/**
 * The job's attempts drawn to scale on one line, from its enqueue to its end
 * (or now): each attempt a bar from its start to its end, coloured by how
 * it ended, the gaps between them the time it waited (backoff, deferral,
 * its turn). A bar too short to see at this scale is drawn 2 px wide; its
 * tooltip has its times.
 */
function timelineSvg(t: AttemptTimeline, width = 720, height = 64): string {
  const pad = 8;
  const from = t.enqueuedAt.getTime();
  const span = Math.max(1, t.until.getTime() - from);
  const x = (at: Date) => pad + ((at.getTime() - from) / span) * (width - 2 * pad);
  const y = 18;
  const bars = t.spans
    .map((s) => {
      const end = x(s.endedAt);
      const start = s.startedAt ? x(s.startedAt) : end;
      const w = Math.max(2, end - start);
      const label = `attempt ${s.attempt}: ${OUTCOME_WORDS[s.outcome]}${s.durationMs !== null ? `, ran ${durationText(s.durationMs)}` : ''}${s.error ? `: ${firstLine(s.error)}` : ''}`;
      return `<g><title>${esc(label)}</title><rect x="${Math.min(start, width - pad - 2).toFixed(1)}" y="${y}" width="${w.toFixed(1)}" height="20" class="span state-${s.outcome}"/></g>`;
    })
    .join('');
  const due = t.dueAt && t.dueAt.getTime() >= from && t.dueAt.getTime() <= t.until.getTime() ? x(t.dueAt) : null;
  const dueMark = due !== null ? `<line x1="${due.toFixed(1)}" y1="${y - 6}" x2="${due.toFixed(1)}" y2="${y + 26}" class="due" stroke-dasharray="3 2"/>` : '';
  const summary = `${t.spans.length} attempt${t.spans.length === 1 ? '' : 's'} over ${durationText(t.until.getTime() - from)} since the job was enqueued`;
  return `<svg class="chart timeline" role="img" aria-label="${esc(summary)}" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" xmlns="http://www.w3.org/2000/svg">
<line x1="${pad}" y1="${y + 10}" x2="${width - pad}" y2="${y + 10}" class="axis" stroke-width="2"/>${bars}${dueMark}
<text x="${pad}" y="${height - 8}" font-size="10">enqueued</text>
<text x="${width - pad}" y="${height - 8}" font-size="10" text-anchor="end">${esc(durationText(t.until.getTime() - from))} later${t.state === 'executing' || t.state === 'claimed' || !t.spans.length ? ' (now)' : ''}</text></svg>`;
}

/** How long the job waited before a span: since the previous one ended, or since its enqueue. */
function waitedBefore(t: AttemptTimeline, i: number): number | null {
  const s = t.spans[i];
  if (!s.startedAt) return null;
  const before = i === 0 ? t.enqueuedAt : t.spans[i - 1].endedAt;
  return s.startedAt.getTime() - before.getTime();
}

function spanRow(t: AttemptTimeline, s: AttemptSpan, i: number): string[] {
  const waited = waitedBefore(t, i);
  return [
    esc(s.attempt),
    waited === null ? show(null) : esc(durationText(Math.max(0, waited))),
    shortWorker(s.worker),
    timeView(s.startedAt),
    s.durationMs === null ? show(null) : esc(durationText(s.durationMs)),
    `<span class="outcome state-${s.outcome}">${esc(OUTCOME_WORDS[s.outcome])}</span>${s.kind && s.kind !== 'raised' ? ` <span class="dim">(${esc(s.kind)})</span>` : ''}`,
    s.error ? `<span title="${esc(s.error)}">${esc(firstLine(s.error))}</span>` : show(null),
  ];
}

/** The job page's "Attempts" section: the drawing, then one row per attempt with the wait before it. */
export function attemptsSection(t: AttemptTimeline): string {
  const rows = t.spans.map((s, i) => spanRow(t, s, i));
  const due = t.dueAt ? `<p>Next attempt due ${timeView(t.dueAt)}.</p>` : '';
  const forgotten = t.forgotten ? '<p class="dim">Earlier attempts are not kept: a job keeps its last 10 errors.</p>' : '';
  return `<section aria-labelledby="attempts-heading"><h2 id="attempts-heading">Attempts</h2>${timelineSvg(t)}
${table(['attempt', 'waited before', 'worker', 'started', 'ran', 'outcome', 'error'], rows, 'not run yet')}${due}${forgotten}</section>`;
}
