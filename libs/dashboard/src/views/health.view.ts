import type { VacuumStanding } from '@stampeded/nestjs/internal';
import { esc, table } from './html.js';
import { layout, type PageContext } from './layout.view.js';
import { durationText, timeView } from './time.view.js';

/**
 * A table's vacuum standing, by the core's rule (VacuumWatch): red only when
 * something is wrong (overdue, or autovacuum off for it); a table merely due
 * is autovacuum's next round's work, and says so.
 */
function vacuumStandingView(v: Record<string, any>): string {
  const standing = v.standing as VacuumStanding;
  const round = durationText(Number(v.naptime_secs) * 1000);
  if (standing === 'clean') return '<span class="dim">not due</span>';
  if (standing === 'due') return `<span title="${esc(`autovacuum starts a round every ${round}`)}">due: autovacuum's next round vacuums it</span>`;
  if (standing === 'off') return '<span class="bad">not vacuumed: autovacuum is off for it; VACUUM it, or turn autovacuum on</span>';
  const since = v.due_since ? durationText(Date.now() - new Date(v.due_since).getTime()) : '';
  return `<span class="bad">overdue: due for ${esc(since)} and not vacuumed; autovacuum is not reaching it</span>`;
}

export function healthPage(ctx: PageContext, health: Record<string, any>): string {
  const partitions = (health.partitions as Record<string, any>[]).map((p) => [
    esc(p.partition),
    esc(p.queue),
    p.has_notify ? '<span class="ok">yes</span>' : '<span class="bad">missing</span>',
    p.has_counts ? '<span class="ok">yes</span>' : '<span class="bad">missing</span>',
  ]);
  const vacuum = (health.vacuum as Record<string, any>[]).map((v) => [
    esc(v.relname),
    esc(v.live_tuples),
    esc(v.dead_tuples),
    esc(Math.round(Number(v.autovac_threshold))),
    vacuumStandingView(v),
    timeView(v.last_autovacuum ?? null),
  ]);
  const sparse = (health.indexes as Record<string, any>[])
    .filter((i) => i.sparse)
    .map((i) => [esc(i.indexname), esc(i.pages), esc(i.entries), esc(Number(i.per_page).toFixed(1))]);
  const version = Math.max(0, ...(health.migrations as { version: number }[]).map((m) => Number(m.version)));
  const leader = health.maintenanceLeader
    ? '<span class="ok">a process leads maintenance</span>'
    : '<span class="bad">no process leads maintenance: dead workers are not reaped, nothing is pruned</span>';
  return layout(
    ctx,
    '/health',
    'Health',
    `<p>PostgreSQL ${esc(health.server.version)}, schema at migration ${version}; ${leader}.</p>
<h2>Partitions</h2>${table(['partition', 'queue', 'notify trigger', 'counter trigger'], partitions)}
<h2>Vacuum</h2>${table(['table', 'live', 'dead', 'autovacuum threshold', 'autovacuum', 'last autovacuum'], vacuum)}
<h2>Sparse indexes</h2>${table(['index', 'pages', 'entries', 'per page'], sparse, 'none: every index is dense')}`,
  );
}
