import type { JobLogs } from '@stampeded/nestjs';
import { envelopeOfText } from '@stampeded/nestjs/internal';
import { esc } from './html.js';
import { encryptedTag } from './stored-json.view.js';

/**
 * A job's ctx.log() lines on its page, oldest first, each after its time
 * and attempt, and, above them, how many older lines its task's
 * logs.maxLines dropped. A line of an encrypted job is said to be, with its
 * key: the dashboard holds no keys.
 */
export function jobLogView(logs: JobLogs | undefined): string {
  if (!logs?.lines.length) return '<p class="dim">no lines: its handler wrote none with ctx.log()</p>';
  const dropped = logs.dropped
    ? `<p class="dim">${esc(`${logs.dropped.toLocaleString('en')} older line${logs.dropped === 1 ? '' : 's'} dropped: the task keeps the newest (its logs.maxLines).`)}</p>`
    : '';
  const lines = logs.lines.map((l) => {
    const sealed = envelopeOfText(l.message);
    return `<span class="dim">${esc(l.at)} #${esc(l.attempt)}</span> ${sealed ? encryptedTag(sealed.kid) : esc(l.message)}`;
  });
  return `${dropped}<pre class="log" tabindex="0">${lines.join('\n')}</pre>`;
}
