import { INSIGHTS_RANGES, type BusyKey, type Insights, type InsightsRange, type Percentiles } from '../inspector/insights-inspector.js';
import { logLineChart, stackedBarChart, type ChartSeries } from './chart.view.js';
import { esc, query, table } from './html.js';
import { layout, type PageContext } from './layout.view.js';
import { stateClass } from './theme.view.js';
import { durationText, timeView } from './time.view.js';

/** Two charts side by side on a laptop's screen, one above the other on a narrower one. */
const CHART_WIDTH = 600;
const CHARTS = 'display:flex;flex-wrap:wrap;gap:0 28px';

const RANGE_LABELS: Record<InsightsRange, string> = { hour: 'Last hour', day: 'Last day', week: 'Last week' };

/**
 * Each series in the theme's colour of the state it is (theme.view.ts), the
 * percentiles in three that keep apart: blue, amber, red as they get worse.
 */
const COLOURS = {
  completed: stateClass('completed'),
  discarded: stateClass('discarded'),
  cancelled: stateClass('cancelled'),
  retried: stateClass('retryable'),
  p50: stateClass('available'),
  p95: stateClass('retryable'),
  p99: stateClass('failed'),
};

/** A percentile read from the rollup's histogram: under a millisecond is its first bucket. */
const latency = (ms: number) => (ms < 1 ? 'under 1 ms' : durationText(ms));
const count = (n: number) => n.toLocaleString('en');
const percentilesText = (p: Percentiles) => (p.p50 === null ? 'none completed' : `p50 ${latency(p.p50)}, p95 ${latency(p.p95!)}, p99 ${latency(p.p99!)}`);

/** The filters: a queue, a task, and the range as links that keep both. */
function filters(ctx: PageContext, data: Insights): string {
  const queues = [...new Set(data.names.map((n) => n.queue))];
  const tasks = [...new Set(data.names.filter((n) => !data.queue || n.queue === data.queue).map((n) => n.task))].sort();
  const option = (value: string, selected: string | null) =>
    `<option value="${esc(value)}"${value === (selected ?? '') ? ' selected' : ''}>${esc(value || 'all')}</option>`;
  const withCurrent = (names: string[], current: string | null) => (current && !names.includes(current) ? [...names, current] : names);
  const ranges = (Object.keys(INSIGHTS_RANGES) as InsightsRange[])
    .map((r) =>
      r === data.range
        ? `<strong aria-current="true">${RANGE_LABELS[r]}</strong>`
        : `<a href="${esc(`${ctx.base}/insights${query({ queue: data.queue, task: data.task, range: r })}`)}">${RANGE_LABELS[r]}</a>`,
    )
    .join(' · ');
  return `<form class="filters" method="get" action="${esc(`${ctx.base}/insights`)}"><p>
<label>queue <select name="queue">${['', ...withCurrent(queues, data.queue)].map((q) => option(q, data.queue)).join('')}</select></label>
<label>task <select name="task">${['', ...withCurrent(tasks, data.task)].map((t) => option(t, data.task)).join('')}</select></label>
<input type="hidden" name="range" value="${esc(data.range)}"><button type="submit">Show</button></p>
<p class="ranges">${ranges}</p></form>`;
}

function busyTable(ctx: PageContext, what: 'tenant' | 'destination', keys: BusyKey[]): string {
  const max = Math.max(1, ...keys.map((k) => k.jobs));
  const rows = keys.map((k) => [
    `<a href="${esc(`${ctx.base}/jobs${query({ [what]: k.key })}`)}">${esc(k.key)}</a>`,
    `<span style="display:inline-block;height:9px;background:var(--chart);width:${Math.max(2, Math.round((k.jobs / max) * 120))}px"></span> ${count(k.jobs)}`,
    k.discarded ? `<span class="bad">${count(k.discarded)}</span>` : '<span class="dim">0</span>',
  ]);
  return table([what, 'jobs finished', 'discarded'], rows, `no job with a ${what} finished in this range`);
}

export function insightsPage(ctx: PageContext, data: Insights): string {
  const at = data.points.map((p) => p.at);
  const per = data.grain === 'minute' ? '/min' : '/h';
  const scope = `${data.queue ? `queue ${data.queue}` : 'all queues'}${data.task ? `, task ${data.task}` : ''}, ${RANGE_LABELS[data.range].toLowerCase()}`;
  const t = data.totals;
  const series = (name: string, colour: string, values: (number | null)[]): ChartSeries => ({ name, colour, values });
  const finished = stackedBarChart(
    [
      series(
        'completed',
        COLOURS.completed,
        data.points.map((p) => p.completed),
      ),
      series(
        'discarded',
        COLOURS.discarded,
        data.points.map((p) => p.discarded),
      ),
      series(
        'cancelled',
        COLOURS.cancelled,
        data.points.map((p) => p.cancelled),
      ),
    ],
    {
      at,
      unit: per,
      width: CHART_WIDTH,
      label: `Jobs finished, ${scope}: ${count(t.completed)} completed, ${count(t.discarded)} discarded, ${count(t.cancelled)} cancelled`,
    },
  );
  const failures = stackedBarChart(
    [
      series(
        'retried',
        COLOURS.retried,
        data.points.map((p) => p.retried),
      ),
      series(
        'failed for good',
        COLOURS.discarded,
        data.points.map((p) => p.failed - p.retried),
      ),
    ],
    { at, unit: per, width: CHART_WIDTH, label: `Failed attempts, ${scope}: ${count(t.failed)} failed, ${count(t.retried)} of them retried` },
  );
  const lines = (pick: (p: Insights['points'][number]) => Percentiles) => [
    series(
      'p50',
      COLOURS.p50,
      data.points.map((p) => pick(p).p50),
    ),
    series(
      'p95',
      COLOURS.p95,
      data.points.map((p) => pick(p).p95),
    ),
    series(
      'p99',
      COLOURS.p99,
      data.points.map((p) => pick(p).p99),
    ),
  ];
  const waits = logLineChart(
    lines((p) => p.wait),
    { at, format: latency, width: CHART_WIDTH, label: `Wait before start, ${scope}: ${percentilesText(t.wait)}` },
  );
  const runs = logLineChart(
    lines((p) => p.run),
    { at, format: latency, width: CHART_WIDTH, label: `Run time, ${scope}: ${percentilesText(t.run)}` },
  );
  const precision = Math.round(data.precision * 100);
  const body = `${filters(ctx, data)}
<div style="${CHARTS}"><section aria-labelledby="finished"><h2 id="finished">Jobs finished <span class="dim">${count(t.completed)} completed, ${count(t.discarded)} discarded, ${count(t.cancelled)} cancelled</span></h2>${finished}</section>
<section aria-labelledby="failures"><h2 id="failures">Failed attempts <span class="dim">${count(t.failed)} failed, ${count(t.retried)} retried</span></h2>${failures}</section>
<section aria-labelledby="waits"><h2 id="waits">Wait before start <span class="dim">${esc(percentilesText(t.wait))}</span></h2>${waits}</section>
<section aria-labelledby="runs"><h2 id="runs">Run time <span class="dim">${esc(percentilesText(t.run))}</span></h2>${runs}</section></div>
<div style="${CHARTS}"><section aria-labelledby="tenants" style="flex:1 1 400px"><h2 id="tenants">Busiest tenants</h2>${busyTable(ctx, 'tenant', data.tenants)}</section>
<section aria-labelledby="destinations" style="flex:1 1 400px"><h2 id="destinations">Busiest destinations</h2>${busyTable(ctx, 'destination', data.destinations)}</section></div>
<p class="dim">From the maintenance leader's rollup of finished jobs, a point ${data.grain === 'minute' ? 'a minute' : 'an hour'} (UTC).
Every job finished by ${data.through ? timeView(data.through) : 'its first run (not yet)'} is counted. Waits (claim minus due time) and runs (finish minus claim)
are those of the completed attempts, read within ${precision}%. A retry is counted when its job finishes, in the minute it failed.
Tenants and destinations are those of the hours the range touches.</p>`;
  return layout(ctx, '/insights', 'Insights', body);
}
