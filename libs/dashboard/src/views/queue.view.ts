import type { Breaker } from '@stampeded/nestjs';
import { JOB_STATES } from '@stampeded/nestjs/internal';
import type { QueueSummary } from '../inspector/queue-inspector.js';
import { esc, query, show, table } from './html.js';
import { actionButton, layout, type PageContext } from './layout.view.js';
import { timeView } from './time.view.js';

/** What an operator typed into the policy form that the core refused, and the values as typed. */
export interface PolicyFormError {
  message: string;
  typed: Record<string, unknown>;
}

/**
 * One queue, with its controls where people look for them: its jobs by
 * state, its verdict, its pause, its policy in a form, and the circuit
 * breakers (per destination, shared by every queue) with a reset.
 */
export function queuePage(ctx: PageContext, queue: QueueSummary, breakers: Breaker[], error?: PolicyFormError): string {
  const here = `${ctx.base}/queues/${encodeURIComponent(queue.queue)}`;
  const counts = JOB_STATES.map((s) =>
    queue.counts[s]
      ? `<a href="${esc(`${ctx.base}/jobs${query({ queue: queue.queue, state: s })}`)}">${esc(s)} ${queue.counts[s]}</a>`
      : `<span class="dim">${esc(s)} 0</span>`,
  ).join(' · ');
  const verdict = `<p><span class="tag ${esc(queue.verdict)}">${esc(queue.verdict)}</span>${queue.reason ? ` <span class="dim">${esc(queue.reason)}</span>` : ''}${
    queue.headWaitSecs === null ? '' : ` · the head of the queue has been due ${esc(queue.headWaitSecs.toFixed(1))}s`
  }</p>`;
  const body = `<p>${counts} · <a href="${esc(`${ctx.base}/jobs${query({ queue: queue.queue })}`)}">every job</a></p>
<h2>Verdict</h2>${verdict}
<h2 id="pause-heading">Pause</h2>${pauseSection(ctx, queue, here)}
<h2 id="policy-heading">Policy</h2>${policySection(ctx, queue, here, error)}
<h2 id="breakers-heading">Circuit breakers</h2>${breakersSection(ctx, breakers, here)}`;
  return layout(ctx, '', `Queue ${queue.queue}`, body);
}

function pauseSection(ctx: PageContext, queue: QueueSummary, here: string): string {
  const action = (name: string) => `/actions/queues/${encodeURIComponent(queue.queue)}/${name}`;
  if (queue.paused) {
    return `<p class="paused"><span class="tag hold">paused</span> by ${esc(queue.pausedBy)} ${timeView(queue.pausedAt)}${queue.pauseReason ? `: ${esc(queue.pauseReason)}` : ''}</p>
<p>${actionButton(ctx, action('resume'), 'Resume', here)}</p>`;
  }
  if (ctx.readOnly) return '<p>Running: workers claim from it.</p>';
  return `<form method="post" action="${esc(ctx.base + action('pause'))}" aria-labelledby="pause-heading">${hidden(ctx, here)}
<p>Running: workers claim from it. <label for="pause-reason">Why pause it</label> <input id="pause-reason" name="reason" size="36" maxlength="4000"> <button type="submit">Pause</button></p></form>`;
}

const POLICY_LABELS: [string, string, string][] = [
  ['maxRunning', 'Max running', 'claimed or executing across every worker; the claim holds it exactly'],
  ['maxWaitSecs', 'Max wait (seconds)', 'once the head of the queue waits this long, the queue is rushed: claimed first'],
];

function policySection(ctx: PageContext, queue: QueueSummary, here: string, error?: PolicyFormError): string {
  const set = queue.policyBy ? `<p class="dim policy-by">Last set by ${esc(queue.policyBy)} ${timeView(queue.policyAt)}.</p>` : '';
  const current = { maxRunning: queue.maxRunning, maxWaitSecs: queue.maxWaitSecs };
  if (ctx.readOnly) {
    return `${table(
      ['setting', 'value'],
      POLICY_LABELS.map(([name, label]) => [esc(label), show(current[name as keyof typeof current] ?? 'none')]),
    )}${set}`;
  }
  const value = (name: string) => (error ? error.typed[name] : current[name as keyof typeof current]) ?? '';
  const invalid = error ? ' aria-invalid="true" aria-describedby="policy-error"' : '';
  const fields = POLICY_LABELS.map(
    ([name, label, help]) =>
      `<p><label for="policy-${name}">${esc(label)}</label> <input id="policy-${name}" name="${name}" inputmode="numeric" size="10" value="${esc(value(name))}"${invalid}> <span class="dim">${esc(help)}; empty for no limit</span></p>`,
  ).join('\n');
  const problem = error ? `<p id="policy-error" class="bad" role="alert">${esc(error.message)}</p>` : '';
  return `<form class="policy" method="post" action="${esc(`${ctx.base}/actions/queues/${encodeURIComponent(queue.queue)}/policy`)}" aria-labelledby="policy-heading">${hidden(ctx, here)}
${problem}${fields}
<p><button type="submit">Save policy</button></p></form>${set}
<p class="dim">Every worker obeys it within its refresh interval (a second by default). A process that declares this queue's policy with <code>registerQueue({ policy })</code> writes its own again when it starts. Rate limits are each process's <code>control.rateLimits</code> option, not stored in the database: they are changed in the app's configuration.</p>`;
}

function breakersSection(ctx: PageContext, breakers: Breaker[], here: string): string {
  const rows = breakers.map((b) => [
    esc(b.destination),
    `<span class="tag${b.state === 'closed' ? '' : ' hold'}">${esc(b.state.replace('_', '-'))}</span>`,
    esc(b.failures),
    b.state === 'open' ? timeView(b.openUntil) : show(null),
    b.state === 'closed' ? show(null) : `${show(b.openedBy)}${b.reason ? ` <span class="dim">${esc(b.reason)}</span>` : ''}`,
    b.closedBy ? `${esc(b.closedBy)} ${timeView(b.closedAt)}` : show(null),
    b.state !== 'closed' || b.failures > 0 ? actionButton(ctx, `/actions/breakers/${encodeURIComponent(b.destination)}/reset`, 'Reset', here) : '',
  ]);
  return `${table(['destination', 'state', 'failures', 'open until', 'opened by', 'last reset by', ''], rows, 'no breaker has moved yet')}
<p class="dim">A breaker is per destination and shared by every queue. Reset closes it for the whole fleet and makes the jobs it deferred due at once.</p>`;
}

const hidden = (ctx: PageContext, back: string) =>
  `<input type="hidden" name="_csrf" value="${esc(ctx.csrf)}"><input type="hidden" name="_back" value="${esc(back)}">`;
