// Draws the results as an SVG: one panel per scenario, one bar per system
// (the median, with a whisker from min to max), each panel on its own scale.
const COLORS = { stampeded: '#d1495b', 'graphile-worker': '#00798c', 'pg-boss': '#edae49', bullmq: '#66a182' };
const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;');

export function drawChart(report) {
  const panels = [];
  for (const row of report.results) {
    if (row.scenario === 'latency') {
      for (const p of ['p50', 'p99']) panels.push({ title: `latency ${p}, ms (lower is better)`, key: p, row, unit: 'ms' });
    } else if (row.scenario === 'snapshot') {
      for (const [key, when] of [
        ['firstP99', 'first'],
        ['lastP99', 'last'],
      ]) {
        panels.push({ title: `snapshot held open: latency p99 of the ${when} 10 s, ms (lower is better)`, key, row, unit: 'ms' });
      }
    } else {
      panels.push({ title: `${row.label}, ${row.unit}`, key: 'value', row, unit: row.unit });
    }
  }
  const systems = Object.keys(report.versions);
  const barH = 16;
  const panelH = 28 + systems.length * (barH + 4) + 8;
  const width = 760;
  const left = 130;
  const plotW = width - left - 110;
  const height = 50 + panels.length * panelH + 30;
  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect width="100%" height="100%" fill="white"/>`);
  out.push(
    `<text x="10" y="22" font-size="15" font-weight="bold">Stampeded vs peers on PostgreSQL ${esc(report.machine.postgres)} (${report.machine.cpus} cores, synchronous_commit ${esc(report.machine.synchronousCommit)})</text>`,
  );
  out.push(
    `<text x="10" y="40" fill="#555">median of ${report.runs} run(s), whiskers min-max; ${esc(systems.map((s) => `${s} ${report.versions[s]}`).join(', '))}</text>`,
  );
  panels.forEach((panel, i) => {
    const y0 = 50 + i * panelH;
    out.push(`<text x="10" y="${y0 + 18}" font-weight="bold">${esc(panel.title)}</text>`);
    const entries = systems.map((s) => [s, panel.row.systems[s]?.[panel.key]]);
    const max = Math.max(1e-9, ...entries.map(([, v]) => v?.max ?? 0));
    entries.forEach(([s, v], j) => {
      const y = y0 + 26 + j * (barH + 4);
      out.push(`<text x="${left - 6}" y="${y + barH - 4}" text-anchor="end">${esc(s)}</text>`);
      if (!v) {
        const na = panel.row.systems[s]?.notApplicable ? 'n/a' : 'no result';
        out.push(`<text x="${left + 4}" y="${y + barH - 4}" fill="#888">${na}</text>`);
        return;
      }
      const w = (v.median / max) * plotW;
      out.push(`<rect x="${left}" y="${y}" width="${w.toFixed(1)}" height="${barH}" fill="${COLORS[s] ?? '#888'}"/>`);
      const x1 = left + (v.min / max) * plotW;
      const x2 = left + (v.max / max) * plotW;
      out.push(`<line x1="${x1.toFixed(1)}" x2="${x2.toFixed(1)}" y1="${y + barH / 2}" y2="${y + barH / 2}" stroke="#222"/>`);
      const label = panel.unit === 'ms' ? v.median.toFixed(1) : Math.round(v.median).toLocaleString('en-US');
      out.push(`<text x="${(Math.max(w, x2 - left) + left + 6).toFixed(1)}" y="${y + barH - 4}">${label}</text>`);
    });
  });
  out.push(`<text x="10" y="${height - 10}" fill="#555">${esc(report.machine.cpu ?? '')}, Node ${esc(report.machine.node)}, ${esc(report.at)}</text>`);
  out.push('</svg>');
  return out.join('\n');
}
