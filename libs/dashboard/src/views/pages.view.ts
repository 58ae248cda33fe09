import { FINISHED_STATES, JOB_STATES } from '@stampeded/nestjs/internal';
import type { WorkflowSummary } from '@stampeded/nestjs';
import { ACTION_STATES } from '../inspector/job-actions.js';
import type { JobPage } from '../inspector/job-inspector.js';
import type { QueueSummary, ThroughputBucket } from '../inspector/queue-inspector.js';
import { throughputChart } from './chart.view.js';
import { jobLogView } from './job-log.view.js';
import { noResultText } from './job-result.view.js';
import { jobTimeView } from './time.view.js';
import { SEARCH_FIELDS, jobSearchForm, searchDescription } from './job-search.view.js';
import { workflowCountsText } from '../inspector/workflow-tree.js';
import { esc, factsTable, query, show, table } from './html.js';
import { encryptedTag, jsonView, storedView } from './stored-json.view.js';
import { actionButton, layout, type PageContext } from './layout.view.js';

/**
 * An id as a list shows it: its tail. UUIDv7 ids begin with their creation
 * time, so jobs made the same minute share a prefix; their last 12 hex
 * characters (random bits) tell them apart. The full id stays in the title.
 */
export const shortId = (id: unknown) => {
  const text = String(id ?? '');
  return text.length > 13 ? `…${text.slice(-12)}` : text;
};

const dedupText = (scope: unknown, period: unknown) => `${scope}${period ? ` per ${period}` : ''}`;

export const jobLink = (ctx: PageContext, id: unknown, queue: unknown) =>
  `<a href="${esc(`${ctx.base}/jobs/${id}${query({ queue })}`)}" title="${esc(id)}"><code>${esc(shortId(id))}</code></a>`;

/** States in which a job's last error is why it is where it is; in any other state the error is history. */
const FAILING = new Set(['retryable', 'discarded']);

/** A job's last error as a list shows it: red while it is the job's trouble, neutral once the job moved on. */
const lastErrorCell = (state: unknown, error: unknown) =>
  !error
    ? show(null)
    : FAILING.has(String(state))
      ? `<span class="bad">${esc(firstLine(error))}</span>`
      : `<span class="dim" title="from an earlier attempt">${esc(firstLine(error))}</span>`;

/** An error's first line: the message, without the stack trace the full text on the job page keeps. */
const firstLine = (text: unknown) => String(text ?? '').split('\n')[0];

const wait = (secs: number | null) => (secs === null ? show(null) : secs > 60 ? `<span class="bad">${secs.toFixed(0)}s</span>` : `${secs.toFixed(1)}s`);

export function queuesPage(ctx: PageContext, queues: QueueSummary[], throughput: ThroughputBucket[]): string {
  const rows = queues.map((q) => [
    `<a href="${esc(`${ctx.base}/queues/${encodeURIComponent(q.queue)}`)}" title="its jobs, pause, policy and breakers">${esc(q.queue)}</a>`,
    ...JOB_STATES.map((s) =>
      q.counts[s] ? `<a href="${esc(`${ctx.base}/jobs${query({ queue: q.queue, state: s })}`)}">${q.counts[s]}</a>` : '<span class="dim">0</span>',
    ),
    wait(q.headWaitSecs),
    q.paused
      ? `<span class="tag hold">paused</span> <span class="dim">by ${esc(q.pausedBy)}${q.pauseReason ? `: ${esc(q.pauseReason)}` : ''}</span>`
      : `<span class="tag ${esc(q.verdict)}">${esc(q.verdict)}</span>${q.reason ? ` <span class="dim">${esc(q.reason)}</span>` : ''}`,
    q.paused
      ? actionButton(ctx, `/actions/queues/${encodeURIComponent(q.queue)}/resume`, 'Resume', ctx.base || '/')
      : actionButton(ctx, `/actions/queues/${encodeURIComponent(q.queue)}/pause`, 'Pause', ctx.base || '/'),
  ]);
  const body = `<h2>Finished per minute, last hour</h2>${throughputChart(throughput)}
<h2>Queues</h2>${table(['Queue', ...JOB_STATES, 'head wait', 'verdict', ''], rows, 'no queues yet')}
<p class="dim">Counts come from the trigger-maintained counters. "Head wait" is how long the next job in claim order has been due.</p>`;
  // What the live refresh announces when it changes: the queues held, not every count.
  const held = queues.filter((q) => q.paused || q.verdict === 'hold').map((q) => q.queue);
  return layout(ctx, '', 'Queues', body, held.length ? `On hold: ${held.join(', ')}` : 'No queue on hold');
}

export function jobsPage(ctx: PageContext, filters: Record<string, string | undefined>, page: JobPage): string {
  const form = jobSearchForm(ctx, filters);
  const rows = page.jobs.map((j) => [
    jobLink(ctx, j.id, j.queue),
    esc(j.queue),
    `${esc(j.task)}${j.args_key_id ? ` ${encryptedTag(j.args_key_id)}` : ''}`,
    esc(j.state),
    `${esc(j.attempt)}/${esc(j.max_attempts)}`,
    show(j.tenant_id),
    show(j.destination),
    jobTimeView(j),
    lastErrorCell(j.state, j.last_error),
  ]);
  const { after: _after, ...rest } = filters;
  const nextHref = page.next ? `${ctx.base}/jobs${query({ ...rest, after: page.next })}` : '';
  const first = filters.after ? `<p><a href="${esc(`${ctx.base}/jobs${query(rest)}`)}">← First page</a></p>` : '';
  // A dead-letter queue's listing offers to put its copies back on their
  // source queues (narrowed to the task filter, when there is one).
  const redrive =
    filters.queue && page.jobs.some((j) => j.source_queue)
      ? `<p>${actionButton(ctx, `/actions/dlq/${encodeURIComponent(filters.queue)}/redrive`, `Redrive ${filters.task ? `${filters.task} jobs` : 'all dead letters'} back to their source queues`, `${ctx.base}/jobs${query(rest)}`, filters.task ? { task: filters.task } : {})}</p>`
      : '';
  // Acting on every match goes through a confirmation page that counts them.
  const { after: _a, scan: _s, ...matching } = filters;
  const bulk =
    ctx.readOnly || !page.jobs.length || SEARCH_FIELDS.some((f) => filters[f])
      ? ''
      : `<p class="bulk">Every job matching this filter: ${BULK_LABELS.map(
          ([action, label]) => `<a class="button" href="${esc(`${ctx.base}/bulk/${action}${query(matching)}`)}">${label}…</a>`,
        ).join(' ')}</p>`;
  const columns = ['id', 'queue', 'task', 'state', 'attempt', 'tenant', 'destination', 'when', 'last error'];
  // An indexed listing refreshes itself; a bounded scan's page reads up to
  // its budget of rows each time, so it stays as it is.
  const live = { ...ctx, refreshSeconds: page.scan ? 0 : ctx.refreshSeconds };
  if (!page.scan) {
    const next = nextHref ? `<p><a rel="next" href="${esc(nextHref)}">Next page →</a></p>` : '';
    return layout(live, '/jobs', 'Jobs', `${form}${redrive}${bulk}${table(columns, rows, 'no jobs match')}${first}${next}`);
  }
  // No index serves this filter: the page is what a bounded read of the
  // table found, and says so, with a link that reads on from where it stopped.
  const budget = page.scan.budget.toLocaleString('en');
  const more = filters.after ? 'more ' : '';
  const which = searchDescription(filters);
  const span = `the ${filters.after ? 'next' : 'first'} ${budget} jobs`;
  let body: string;
  if (!page.scan.ranOut) {
    const next = nextHref ? `<p><a rel="next" href="${esc(nextHref)}">Next page →</a></p>` : '';
    body = `${table(columns, rows, `no ${more}${which}`)}${first}${next}`;
  } else {
    const further = ` <a rel="next" href="${esc(nextHref)}">Search further →</a>`;
    const found = page.jobs.length === 1 ? '1 match' : `${page.jobs.length} matches`;
    body = page.jobs.length
      ? `${table(columns, rows)}<p>Showing ${found} found in ${esc(span)}.${further}</p>${first}`
      : `<p>No ${more}${esc(which)} among ${esc(span)}.${further}</p>${first}`;
  }
  const note = `<p class="dim">No index serves this filter: each page reads at most ${budget} jobs${filters.queue ? ` of ${esc(filters.queue)}` : ''}, in the list's order, and shows those that match.</p>`;
  return layout(ctx, '/jobs', 'Jobs', `${form}${redrive}${bulk}${body}${note}`);
}

const BULK_LABELS: [string, string][] = [
  ['retry', 'Retry'],
  ['cancel', 'Cancel'],
  ['discard', 'Discard'],
];

const BULK_APPLIES: Record<string, string> = {
  retry: 'discarded or cancelled',
  cancel: 'unfinished',
  discard: 'waiting',
};

/** A bulk action's confirmation: the count it would change now, and the button that does it. */
export function bulkConfirmPage(ctx: PageContext, action: string, filters: Record<string, string | undefined>, matched: number, truncated: boolean): string {
  const label = BULK_LABELS.find(([a]) => a === action)?.[1] ?? action;
  const back = `${ctx.base}/jobs${query(filters)}`;
  const described = Object.entries(filters)
    .filter(([, v]) => v)
    .map(([k, v]) => `${k} = ${v}`)
    .join(', ');
  const which = `${BULK_APPLIES[action]} jobs${described ? ` matching ${described}` : ' in every queue'}`;
  const count = `${matched.toLocaleString('en')}${truncated ? ' or more' : ''}`;
  const body = matched
    ? `<p>${esc(`${label} ${count} ${which}?`)}</p>${truncated ? `<p class="dim">${esc(`It acts on the first ${matched.toLocaleString('en')}; confirm again for the rest.`)}</p>` : ''}
<p>${actionButton(ctx, `/actions/bulk/${encodeURIComponent(action)}`, `${label} ${count} jobs`, back, Object.fromEntries(Object.entries(filters).filter((e): e is [string, string] => Boolean(e[1]))))} <a href="${esc(back)}">Back to the list</a></p>`
    : `<p>${esc(`No ${which}: nothing to ${action}.`)}</p><p><a href="${esc(back)}">Back to the list</a></p>`;
  return layout(ctx, '/jobs', `${label} jobs`, body);
}

/** A job's page; `history` is what happened to it (its attempts and related jobs: job-history.view.ts), after its facts. */
export function jobPage(ctx: PageContext, job: Record<string, any>, history = ''): string {
  const back = `${ctx.base}/jobs/${job.id}${query({ queue: job.queue })}`;
  const action = (name: string, label: string) => actionButton(ctx, `/actions/jobs/${job.id}/${name}${query({ queue: job.queue })}`, label, back);
  const actions = [
    ACTION_STATES.retry.includes(job.state) ? action('retry', 'Retry') : '',
    ACTION_STATES.run.includes(job.state) ? action('run', 'Run now') : '',
    ACTION_STATES.cancel.includes(job.state) ? action('cancel', 'Cancel') : '',
    ACTION_STATES.discard.includes(job.state) ? action('discard', 'Discard') : '',
  ].join(' ');
  const facts: [string, string][] = [
    ['queue', `<a href="${esc(`${ctx.base}/jobs${query({ queue: job.queue })}`)}">${esc(job.queue)}</a>`],
    ['task', esc(job.task)],
    ['state', `<strong>${esc(job.state)}</strong>`],
    ['progress', progressView(job.progress)],
    ['attempt', `${esc(job.attempt)} of ${esc(job.max_attempts)}`],
    ['interruptions', `${esc(job.interruptions)} of ${esc(job.max_interruptions)}`],
    ['deferrals', `${esc(job.deferrals)} of ${esc(job.max_deferrals)}`],
    ['priority', esc(job.priority)],
    ['tenant', show(job.tenant_id)],
    ['destination', show(job.destination)],
    ['scheduled at', show(job.scheduled_at)],
    ['inserted at', show(job.inserted_at)],
    ['finished at', show(job.finished_at)],
    ['claimed by', show(job.claimed_by)],
    ['attempted by', show((job.attempted_by ?? []).join(', '))],
    ['failure kind', show(job.failure_kind)],
    [
      'error fingerprint',
      job.error_fingerprint
        ? `<a href="${esc(`${ctx.base}/jobs${query({ fingerprint: String(job.error_fingerprint).slice(0, 16) })}`)}" title="every job with this error">${esc(String(job.error_fingerprint).slice(0, 16))}…</a>`
        : show(null),
    ],
    [
      'dedup',
      // A debounce follow-up (migration 17) holds no scope yet: it waits behind the job that does.
      job.dedup_follows
        ? `${esc(dedupText(job.dedup_follow_scope, job.dedup_period))}: waits behind ${jobLink(ctx, job.dedup_follows, job.queue)}, and takes the scope when it finishes`
        : show(job.dedup_scope ? dedupText(job.dedup_scope, job.dedup_period) : null),
    ],
    ['dead-letter queue', show(job.dead_letter_queue)],
    [
      'dead-lettered from',
      job.source_id ? `${jobLink(ctx, job.source_id, job.source_queue)} in ${esc(job.source_queue)} after ${esc(job.source_attempts)} attempt(s)` : show(null),
    ],
  ];
  const errors = (job.errors ?? []) as Record<string, unknown>[];
  const result = job.result != null ? storedView(job.result) : `<p class="dim">${esc(noResultText(job.state))}</p>`;
  const body = `<p>${actions}</p>
${factsTable(facts)}
${history}
<h2>Result</h2>${result}
<h2>Log</h2>${jobLogView(job.logs)}
${lastErrorView(job)}
<h2>Error history</h2>${table(
    ['attempt', 'at', 'kind', 'message', 'destination', 'exit status'],
    errors.map((e) => [esc(e.attempt), esc(e.at), esc(e.kind), esc(firstLine(e.message)), show(e.destination), show(e.exit_status)]),
    'no errors',
  )}
<h2>Args</h2>${storedView(job.args)}
<h2>Meta</h2>${jsonView(job.meta)}
<h2>Checkpoint</h2>${job.checkpoint === null ? '<p class="dim">none</p>' : `<p class="dim">#${esc(job.checkpoint_seq)} at ${esc(job.checkpoint_at)}</p>${jsonView(job.checkpoint)}`}`;
  // A job still on its way (waiting, running: its progress moves) keeps its
  // page live; a finished one's page stays as it is.
  const live = !FINISHED_STATES.has(job.state);
  return layout({ ...ctx, refreshSeconds: live ? ctx.refreshSeconds : 0 }, '/jobs', `Job ${job.id}`, body, `The job is ${job.state}`);
}

/**
 * A job's last error on its page: marked as the failure while the job is
 * retryable or discarded; on a job that went on (completed, retried, running
 * again) it is an earlier attempt's error and is shown as history.
 */
function lastErrorView(job: Record<string, any>): string {
  if (!job.last_error) return '';
  return FAILING.has(job.state)
    ? `<h2>Last error</h2><pre class="error" tabindex="0">${esc(job.last_error)}</pre>`
    : `<h2>Last error <span class="dim">(an earlier attempt's; the job is ${esc(job.state)} now)</span></h2><pre tabindex="0">${esc(job.last_error)}</pre>`;
}

/**
 * A job's progress as its page shows it: the value, after a bar when it
 * reads as a fraction (a number from 0 to 100, or { done, total }).
 */
function progressView(progress: unknown): string {
  if (progress == null) return show(null);
  const { done, total } = (typeof progress === 'object' ? progress : {}) as { done?: unknown; total?: unknown };
  const fraction = typeof progress === 'number' ? progress / 100 : typeof done === 'number' && typeof total === 'number' && total > 0 ? done / total : NaN;
  const bar = fraction >= 0 && fraction <= 1 ? `<progress max="1" value="${fraction}">${Math.round(fraction * 100)}%</progress> ` : '';
  return `${bar}<code>${esc(JSON.stringify(progress))}</code>`;
}

export function errorsPage(ctx: PageContext, errors: Record<string, any>[]): string {
  const rows = errors.map((e) => [
    `<a href="${esc(`${ctx.base}/jobs${query({ fingerprint: String(e.fingerprint).slice(0, 12) })}`)}" title="every job with this error"><code>${esc(String(e.fingerprint).slice(0, 12))}</code></a>`,
    esc(e.jobs),
    esc(e.retrying),
    e.discarded ? `<span class="bad">${esc(e.discarded)}</span>` : '0',
    esc((e.queues ?? []).join(', ')),
    esc((e.tasks ?? []).join(', ')),
    esc((e.failure_kinds ?? []).join(', ')),
    `${jobLink(ctx, e.example_id, e.example_queue)} <span class="bad">${esc(firstLine(e.example_error))}</span>`,
  ]);
  return layout(
    ctx,
    '/errors',
    'Errors',
    `${table(['fingerprint', 'jobs', 'retrying', 'discarded', 'queues', 'tasks', 'kinds', 'example'], rows, 'no failing jobs')}
<p class="dim">Jobs retrying or discarded now, grouped by their error's fingerprint (the message with ids and numbers taken out).</p>`,
  );
}

export function workersPage(ctx: PageContext, data: { workers: Record<string, any>[]; running: Record<string, any>[] }): string {
  const workers = data.workers.map((w) => [
    `<code title="${esc(w.id)}">${esc(shortId(w.id))}</code>`,
    esc(w.hostname),
    esc(w.pid),
    esc((w.queues ?? []).join(', ')),
    show(w.started_at),
    Number(w.silent_secs) > 60 ? `<span class="bad">${Number(w.silent_secs).toFixed(0)}s ago</span>` : `${Number(w.silent_secs).toFixed(1)}s ago`,
    esc(w.running),
  ]);
  const running = data.running.map((j) => [
    jobLink(ctx, j.id, j.queue),
    esc(j.queue),
    esc(j.task),
    `<code title="${esc(j.claimed_by)}">${esc(shortId(j.claimed_by))}</code>`,
    show(j.claimed_at),
    show(j.heartbeat_at),
    esc(j.attempt),
  ]);
  return layout(
    ctx,
    '/workers',
    'Workers',
    `${table(['id', 'host', 'pid', 'queues', 'started', 'last heartbeat', 'running'], workers, 'no workers registered')}
<h2>Running jobs</h2>${table(['job', 'queue', 'task', 'worker', 'claimed', 'heartbeat', 'attempt'], running, 'nothing running')}`,
  );
}

export function schedulesPage(ctx: PageContext, schedules: Record<string, any>[]): string {
  const back = `${ctx.base}/schedules`;
  const rows = schedules.map((s) => [
    esc(s.key),
    esc(s.queue),
    esc(s.task),
    esc(s.cron_expr ?? `every ${s.interval_secs}s`),
    `${esc(s.next_run_local)} <span class="dim">${esc(s.timezone)}</span>`,
    show(s.last_run_at),
    s.paused ? '<span class="tag hold">paused</span>' : '<span class="tag">active</span>',
    `${actionButton(ctx, `/actions/schedules/${encodeURIComponent(s.key)}/${s.paused ? 'resume' : 'pause'}`, s.paused ? 'Resume' : 'Pause', back)} ${actionButton(ctx, `/actions/schedules/${encodeURIComponent(s.key)}/trigger`, 'Run now', back)}`,
  ]);
  return layout(ctx, '/schedules', 'Schedules', table(['key', 'queue', 'task', 'rule', 'next run', 'last run', 'state', ''], rows, 'no schedules'));
}

export function errorPage(ctx: PageContext, status: number, message: string): string {
  return layout(ctx, '', status === 404 ? 'Not found' : 'Error', `<p class="bad">${esc(message)}</p>`);
}

export function workflowsPage(ctx: PageContext, workflows: WorkflowSummary[]): string {
  const rows = workflows.map((w) => [
    `<a href="${esc(`${ctx.base}/workflows/${w.id}`)}">${esc(w.name)}</a>`,
    `<code title="${esc(w.id)}">${esc(shortId(w.id))}</code>`,
    esc(w.kind),
    esc(w.jobs),
    `<span class="tag">${esc(w.state)}</span>`,
    esc(workflowCountsText(w.counts)),
    show(w.insertedAt),
  ]);
  return layout(ctx, '/workflows', 'Workflows', table(['name', 'id', 'kind', 'jobs', 'state', 'jobs by state', 'enqueued'], rows, 'no workflows'));
}
