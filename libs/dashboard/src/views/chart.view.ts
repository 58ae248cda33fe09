import type { ThroughputBucket } from '../inspector/queue-inspector.js';
import { esc } from './html.js';

// The dashboard's charts: inline SVG drawn on the server, no script and no
// library, so that they show under the pages' Content-Security-Policy and
// refresh with the page they are on. Each has a title per point (the
// tooltip) and an aria-label that says what it shows in words. Their
// colours are the theme's (theme.view.ts), named by class.

/** One series of a chart: its name, the class that colours it, and its value at each point. */
export interface ChartSeries {
  name: string;
  /** A state's class (stateClass(), 'state-completed'), or '' for the chart colour. */
  colour: string;
  values: readonly (number | null)[];
}

export interface ChartOptions {
  /** Epoch seconds of each point's start. */
  at: readonly number[];
  /** What the chart shows, for screen readers; the values follow it. */
  label: string;
  /** How a value reads in the tooltip and on the axis. */
  format?: (n: number) => string;
  /** The unit after the axis maximum, e.g. '/min'. */
  unit?: string;
  width?: number;
  height?: number;
}

const PAD_LEFT = 44;
const PAD_BOTTOM = 18;
const PAD_TOP = 14;

/** Time of day (UTC) for a point's start; with the date when the points span more than a day. */
function clock(at: number, long: boolean): string {
  const iso = new Date(at * 1000).toISOString();
  return long ? `${iso.slice(5, 10)} ${iso.slice(11, 16)}` : iso.slice(11, 16);
}

/** A series' fill: its state's colour (.span), or the chart colour (.bar). */
const fillClass = (s: ChartSeries) => (s.colour ? `span ${s.colour}` : 'bar');

function frame(o: ChartOptions, top: string, body: string, legend: readonly ChartSeries[]): string {
  const width = o.width ?? 720;
  const height = o.height ?? 140;
  const long = o.at.length > 1 && o.at[o.at.length - 1] - o.at[0] > 86_400;
  const base = height - PAD_BOTTOM;
  const ticks = o.at.length
    ? [0, Math.floor((o.at.length - 1) / 2), o.at.length - 1]
        .map((i, n) => {
          const x = PAD_LEFT + ((i + 0.5) * (width - PAD_LEFT)) / o.at.length;
          const anchor = n === 0 ? 'start' : n === 2 ? 'end' : 'middle';
          return `<text x="${x.toFixed(1)}" y="${height - 4}" font-size="10" text-anchor="${anchor}">${clock(o.at[i], long)}</text>`;
        })
        .join('')
    : '';
  const keys =
    legend.length > 1
      ? legend
          .map(
            (s, i) =>
              `<rect x="${PAD_LEFT + 4 + i * 110}" y="2" width="9" height="9" class="${fillClass(s)}"/><text x="${PAD_LEFT + 16 + i * 110}" y="10" font-size="10">${esc(s.name)}</text>`,
          )
          .join('')
      : '';
  return `<svg class="chart" role="img" aria-label="${esc(o.label)}" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" xmlns="http://www.w3.org/2000/svg">
<text x="2" y="${PAD_TOP + 8}" font-size="10">${esc(top)}</text>${keys}
<line x1="${PAD_LEFT}" y1="${base}" x2="${width}" y2="${base}" class="axis"/>${body}${ticks}</svg>`;
}

/**
 * Bars, one a point, each stacked from its series bottom up: jobs finished
 * per minute by outcome, say. A point with nothing draws nothing but keeps
 * its tooltip.
 */
export function stackedBarChart(series: readonly ChartSeries[], o: ChartOptions): string {
  const width = o.width ?? 720;
  const height = o.height ?? 140;
  const format = o.format ?? ((n: number) => String(n));
  const sums = o.at.map((_, i) => series.reduce((n, s) => n + (s.values[i] ?? 0), 0));
  const max = Math.max(1, ...sums);
  const barWidth = (width - PAD_LEFT) / Math.max(1, o.at.length);
  const scale = (n: number) => (n / max) * (height - PAD_BOTTOM - PAD_TOP);
  const bars = o.at
    .map((at, i) => {
      const x = PAD_LEFT + i * barWidth;
      let y = height - PAD_BOTTOM;
      const rects = series
        .map((s) => {
          const v = s.values[i] ?? 0;
          if (!v) return '';
          const h = scale(v);
          y -= h;
          return `<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${Math.max(1, barWidth - 1).toFixed(1)}" height="${h.toFixed(1)}" class="${fillClass(s)}"/>`;
        })
        .join('');
      const tip = `${clock(at, false)} UTC: ${series.map((s) => `${format(s.values[i] ?? 0)} ${s.name}`).join(', ')}`;
      return `<g><title>${esc(tip)}</title>${rects}</g>`;
    })
    .join('');
  return frame(o, `${format(max)}${o.unit ?? ''}`, bars, series);
}

/**
 * Lines on a logarithmic scale, one a series, broken where a point has no
 * value: waits and runs as p50, p95 and p99, which span milliseconds to
 * minutes in one chart.
 */
export function logLineChart(series: readonly ChartSeries[], o: ChartOptions): string {
  const width = o.width ?? 720;
  const height = o.height ?? 140;
  const format = o.format ?? ((n: number) => String(n));
  const values = series.flatMap((s) => s.values.filter((v): v is number => v !== null && v > 0));
  const max = Math.max(1, ...values);
  const min = Math.min(max / 10, ...values);
  const span = Math.log(max) - Math.log(min) || 1;
  const y = (v: number) => height - PAD_BOTTOM - ((Math.log(Math.max(v, min)) - Math.log(min)) / span) * (height - PAD_BOTTOM - PAD_TOP);
  const step = (width - PAD_LEFT) / Math.max(1, o.at.length);
  const x = (i: number) => PAD_LEFT + (i + 0.5) * step;
  const lines = series
    .map((s) => {
      let d = '';
      let pen = false;
      s.values.forEach((v, i) => {
        if (v === null) {
          pen = false;
          return;
        }
        d += `${pen ? 'L' : 'M'}${x(i).toFixed(1)} ${y(v).toFixed(1)}`;
        pen = true;
      });
      // A point alone between gaps is a dot, not an invisible line.
      const dots = s.values
        .map((v, i) =>
          v !== null && s.values[i - 1] == null && s.values[i + 1] == null
            ? `<circle cx="${x(i).toFixed(1)}" cy="${y(v).toFixed(1)}" r="1.8" class="${fillClass(s)}"/>`
            : '',
        )
        .join('');
      return `${d ? `<path d="${d}" class="line ${s.colour}"/>` : ''}${dots}`;
    })
    .join('');
  const tips = o.at
    .map((at, i) => {
      const tip = `${clock(at, false)} UTC: ${series.map((s) => `${s.name} ${s.values[i] === null ? '-' : format(s.values[i]!)}`).join(', ')}`;
      return `<rect x="${(PAD_LEFT + i * step).toFixed(1)}" y="${PAD_TOP}" width="${step.toFixed(1)}" height="${height - PAD_BOTTOM - PAD_TOP}" fill="transparent"><title>${esc(tip)}</title></rect>`;
    })
    .join('');
  const floor = `<text x="2" y="${height - PAD_BOTTOM}" font-size="10">${values.length ? esc(format(min)) : ''}</text>`;
  return frame(o, values.length ? format(max) : '', `${floor}${lines}${tips}`, series);
}

/** Jobs finished per minute as bars, all queues: the queues page's chart. */
export function throughputChart(buckets: ThroughputBucket[], width = 720, height = 140): string {
  const total = buckets.reduce((n, b) => n + b.finished, 0);
  return stackedBarChart([{ name: 'finished', colour: '', values: buckets.map((b) => b.finished) }], {
    at: buckets.map((b) => b.at),
    label: `${total} jobs finished in the last hour`,
    unit: '/min',
    width,
    height,
  });
}
