import type { JobRef, RelatedJobs } from '../inspector/related-jobs.js';
import { esc, factsTable, query } from './html.js';
import type { PageContext } from './layout.view.js';

const link = (ctx: PageContext, ref: JobRef) => {
  const tail = ref.id.length > 13 ? `…${ref.id.slice(-12)}` : ref.id;
  const label = ref.name ?? ref.task;
  return `<a href="${esc(`${ctx.base}/jobs/${ref.id}${query({ queue: ref.queue })}`)}" title="${esc(ref.id)}">${label ? `${esc(label)} ` : ''}<code>${esc(tail)}</code></a>${ref.state ? ` <span class="tag ${esc(ref.state)}">${esc(ref.state)}</span>` : ''}`;
};
const list = (ctx: PageContext, refs: JobRef[], none: string) =>
  refs.length ? refs.map((r) => link(ctx, r)).join(', ') : `<span class="dim">${esc(none)}</span>`;

/** The job page's "Related jobs" section: a row per relation the job has; none when it has none. */
export function relatedSection(ctx: PageContext, related: RelatedJobs): string {
  const rows: [string, string][] = [];
  if (related.source) rows.push(['dead-letter copy of', `${link(ctx, related.source)} after ${esc(related.source.attempts ?? '?')} attempt(s)`]);
  if (related.deadLetter) {
    rows.push([
      'its dead letter',
      related.deadLetter.copy
        ? `${link(ctx, related.deadLetter.copy)} in ${esc(related.deadLetter.queue)}`
        : `<span class="dim">none waiting in ${esc(related.deadLetter.queue)}: handled, redriven or pruned</span>`,
    ]);
  }
  if (related.workflow) {
    const w = related.workflow;
    rows.push([`its ${w.kind}`, `<a href="${esc(`${ctx.base}/workflows/${w.id}`)}">${esc(w.name)}</a>, as <strong>${esc(w.as)}</strong>`]);
    rows.push(['waits for', list(ctx, w.waitsFor, 'nothing: it starts the workflow')]);
    rows.push(['waited for by', list(ctx, w.waitedForBy, 'nothing: it ends the workflow')]);
  }
  if (related.ordering) {
    const o = related.ordering;
    const scanned = o.scanned.toLocaleString('en');
    rows.push([
      `key ${o.key}: before it`,
      o.before ? link(ctx, o.before) : `<span class="dim">none among the ${esc(scanned)} jobs of its queue enqueued before it</span>`,
    ]);
    rows.push([
      `key ${o.key}: after it`,
      o.after ? link(ctx, o.after) : `<span class="dim">none among the ${esc(scanned)} jobs of its queue enqueued after it</span>`,
    ]);
  }
  if (related.dedup) {
    const d = related.dedup;
    rows.push([
      `dedup ${d.scope}${d.period ? ` per ${d.period}` : ''}`,
      d.period
        ? list(ctx, d.twins, `no unfinished job of this scope in the ${d.period} before or after`)
        : '<span class="dim">no twin: a scope without a period is held by one job at a time</span>',
    ]);
  }
  if (!rows.length) return '';
  return `<section aria-labelledby="related-heading"><h2 id="related-heading">Related jobs</h2>${factsTable(rows, 'related')}</section>`;
}
