import type { ThroughputBucket } from '../inspector/queue-inspector.js';
import { esc } from './html.js';

/** Jobs finished per minute as bars, inline SVG: no script, no library. */
export function throughputChart(buckets: ThroughputBucket[], width = 720, height = 140): string {
  const pad = 24;
  const max = Math.max(1, ...buckets.map((b) => b.finished));
  const barWidth = (width - pad) / Math.max(1, buckets.length);
  const scale = (n: number) => (n / max) * (height - pad);
  const bars = buckets
    .map((b, i) => {
      const x = pad + i * barWidth;
      const h = scale(b.finished);
      const y = height - pad / 2 - h;
      const bar = b.finished
        ? `<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${Math.max(1, barWidth - 1).toFixed(1)}" height="${h.toFixed(1)}" class="bar"/>`
        : '';
      const label = `${new Date(b.at * 1000).toISOString().slice(11, 16)} UTC: ${b.finished} finished`;
      return `<g><title>${esc(label)}</title>${bar}</g>`;
    })
    .join('');
  const total = buckets.reduce((n, b) => n + b.finished, 0);
  return `<svg class="chart" role="img" aria-label="${total} jobs finished in the last hour" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" xmlns="http://www.w3.org/2000/svg">
<text x="2" y="12" font-size="10">${max}/min</text>
<line x1="${pad}" y1="${height - pad / 2}" x2="${width}" y2="${height - pad / 2}" class="axis"/>${bars}</svg>`;
}
