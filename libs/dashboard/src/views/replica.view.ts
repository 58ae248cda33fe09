import type { ReplicaStatus } from '@stampeded/nestjs/internal';
import { esc } from './html.js';
import { durationText } from './time.view.js';

/** Where a page read from, when a replica is configured: caught up, how far behind, or the primary while the replica is down. */
export function replicaView(status: ReplicaStatus | null | undefined): string {
  if (!status) return '';
  if (status.readingFrom === 'primary') {
    return `<p class="replica bad" data-reading-from="primary">The replica does not answer${status.error ? ` (${esc(status.error)})` : ''}: this page reads the primary.</p>`;
  }
  const lag = status.lagSeconds;
  const text = status.caughtUp
    ? 'Read from the replica, caught up.'
    : lag === null
      ? 'Read from the replica, behind the primary by an unknown time.'
      : `Read from the replica, ${esc(durationText(lag * 1000))} behind the primary.`;
  const seconds = lag === null ? '' : ` data-lag-seconds="${lag.toFixed(3)}"`;
  return `<p class="replica${status.caughtUp ? ' dim' : ''}" data-reading-from="replica"${seconds}>${text}</p>`;
}
