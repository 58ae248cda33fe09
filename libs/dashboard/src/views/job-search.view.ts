import { JOB_STATES } from '@stampeded/nestjs/internal';
import { esc } from './html.js';
import { layout, type PageContext } from './layout.view.js';

/** The searches beside the plain filters: their presence turns the bulk actions off, which act on the plain filters alone. */
export const SEARCH_FIELDS = ['id', 'fingerprint', 'args', 'meta'] as const;

const HINTS: Record<string, string> = {
  queue: 'emails',
  task: 'send-email',
  tenant: 'tenant id',
  destination: 'api.example.com',
  id: 'id, or its last digits',
  fingerprint: 'first 8+ hex digits',
  args: '{"orderId": 42}',
  meta: '{"activejob": {}}',
};

const field = (filters: Record<string, string | undefined>, name: string, label: string, size = 14) =>
  `<label>${esc(label)} <input name="${name}" placeholder="${esc(HINTS[name])}" value="${esc(filters[name] ?? '')}" size="${size}"${
    name === 'args' || name === 'meta' ? ' spellcheck="false" autocomplete="off"' : ''
  }></label>`;

/**
 * The jobs page's form: the filters, then the searches, each labelled, in
 * one GET form (the address is the search: it can be bookmarked and shared).
 */
export function jobSearchForm(ctx: PageContext, filters: Record<string, string | undefined>): string {
  const state = `<label>state <select name="state"><option value="">any state</option>${JOB_STATES.map(
    (s) => `<option${filters.state === s ? ' selected' : ''}>${s}</option>`,
  ).join('')}</select></label>`;
  // A scan budget given in the address stays with the filters it was given for.
  const scan = filters.scan ? `<input type="hidden" name="scan" value="${esc(filters.scan)}">` : '';
  return `<form class="filters" role="search" aria-label="Find jobs" method="get" action="${esc(`${ctx.base}/jobs`)}">
<p>${field(filters, 'queue', 'queue', 12)}${state}${field(filters, 'task', 'task', 12)}${field(filters, 'tenant', 'tenant', 12)}${field(filters, 'destination', 'destination', 12)}</p>
<p>${field(filters, 'id', 'id', 20)}${field(filters, 'fingerprint', 'error fingerprint', 16)}${field(filters, 'args', 'args contain', 18)}${field(filters, 'meta', 'meta contains', 18)}${scan}<button>Find</button></p>
</form>`;
}

/** What a bounded search looked for, in words: "completed jobs of task send-email whose args contain {"orderId":42}". */
export function searchDescription(filters: Record<string, string | undefined>): string {
  const parts = [
    filters.task ? ` of task ${filters.task}` : '',
    filters.queue ? ` in ${filters.queue}` : '',
    filters.id ? ` whose id ends ${filters.id}` : '',
    filters.args ? ` whose args contain ${filters.args}` : '',
    filters.meta ? ` whose meta contains ${filters.meta}` : '',
  ];
  return `${filters.state ? `${filters.state} ` : ''}jobs${parts.join('')}`;
}

/** The jobs page for a search it could not read: the form as it was typed, and what to type instead. */
export function badSearchPage(ctx: PageContext, filters: Record<string, string | undefined>, message: string): string {
  return layout(ctx, '/jobs', 'Jobs', `${jobSearchForm(ctx, filters)}<p class="bad" role="alert">${esc(message)}</p>`);
}
