import { createHash } from 'node:crypto';
import { esc } from './html.js';

export interface PageContext {
  /** Where the dashboard is mounted, e.g. '/stampeded'. */
  base: string;
  csrf: string;
  readOnly: boolean;
  refreshSeconds?: number;
}

const NAV: [string, string][] = [
  ['', 'Queues'],
  ['/jobs', 'Jobs'],
  ['/errors', 'Errors'],
  ['/schedules', 'Schedules'],
  ['/workflows', 'Workflows'],
  ['/workers', 'Workers'],
  ['/health', 'Health'],
];

// Pages are rendered here and actions are plain form posts: everything works
// without a script. One constant inline script, allowed by its hash alone,
// refreshes a live page in place; without it a live page reloads itself
// (the <noscript> refresh).
const STYLE = `
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:10px 20px;display:flex;gap:18px;align-items:center}
header a{color:#cfd6e4;text-decoration:none}header a.on{color:#fff;font-weight:600}
header .brand{font-weight:700;color:#fff;margin-right:12px}
main{padding:16px 20px}h1{font-size:20px;margin:4px 0 14px}h2{font-size:16px;margin:20px 0 8px}
table{border-collapse:collapse;background:#fff;width:100%;margin-bottom:12px}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #e3e6eb;vertical-align:top}
th{font-size:12px;text-transform:uppercase;color:#5b6475}
.dim{color:#8a93a3}.bad{color:#b3261e;font-weight:600}.ok{color:#1e7a3b}
pre{background:#fff;border:1px solid #e3e6eb;padding:8px;overflow:auto;max-height:300px}
pre.error{border-color:#e6a7a2;border-left:4px solid #b3261e}h2 .dim{font-weight:400;font-size:13px}
details.json summary{cursor:pointer;color:#3a5a9c;margin-bottom:4px}details.json pre{max-height:600px}
form.inline{display:inline}button{cursor:pointer;padding:3px 10px}
.filters p{margin:0 0 6px}.filters label{margin-right:10px;font-size:13px;color:#5b6475}.filters input,.filters select{margin-left:2px}.chart{background:#fff;border:1px solid #e3e6eb}
.tag{display:inline-block;padding:0 6px;border-radius:8px;background:#e8ebf1;font-size:12px}
.tag.hold{background:#fde2e0;color:#8c1d18}.tag.encrypted{background:#e3f1e6;color:#1d5c2c}.tag.rush{background:#fff1cc}
progress{width:160px;vertical-align:middle;margin-right:6px}
a.button{display:inline-block;padding:2px 10px;border:1px solid #b9c0cc;border-radius:3px;background:#fff;color:#1d2330;text-decoration:none}
header label.live{margin-left:auto;color:#cfd6e4;font-size:13px;cursor:pointer}
`;

/**
 * Refreshes a live page in place: every main[data-refresh] seconds it fetches
 * the page and swaps its <main> in (no flicker, open folds kept open). It
 * waits while the tab is hidden, while the operator types in a form or has
 * text selected, and when the header toggle is off (remembered per browser).
 * A page whose fresh copy is no longer live (a job that finished) stops it.
 */
const LIVE_SCRIPT = `(() => {
  const box = document.getElementById('live');
  if (!box) return;
  const toggle = box.closest('label');
  const key = 'stampeded-live';
  let timer;
  const seconds = () => Number(document.querySelector('main').dataset.refresh) || 0;
  const busy = () => {
    const active = document.activeElement;
    return (active && active.matches && active.matches('main input, main select, main textarea')) || String(window.getSelection()).length > 0;
  };
  const schedule = () => {
    clearTimeout(timer);
    toggle.hidden = seconds() === 0;
    if (box.checked && seconds() > 0 && !document.hidden) timer = setTimeout(tick, seconds() * 1000);
  };
  async function tick() {
    if (!box.checked || document.hidden) return;
    if (!busy()) {
      try {
        const response = await fetch(location.href, { credentials: 'same-origin', headers: { accept: 'text/html' } });
        const fresh = new DOMParser().parseFromString(await response.text(), 'text/html');
        const main = fresh.querySelector('main');
        if (response.ok && main && !busy()) {
          const open = [...document.querySelectorAll('main details')].map((d) => d.open);
          document.querySelector('main').replaceWith(document.adoptNode(main));
          document.querySelectorAll('main details').forEach((d, i) => { if (open[i]) d.open = true; });
          document.title = fresh.title;
          toggle.title = '';
        } else if (!response.ok) toggle.title = 'the last refresh failed: ' + response.status;
      } catch (error) {
        toggle.title = 'the last refresh failed: ' + error;
      }
    }
    schedule();
  }
  box.checked = localStorage.getItem(key) !== 'off';
  box.addEventListener('change', () => {
    localStorage.setItem(key, box.checked ? 'on' : 'off');
    if (box.checked) tick();
    else schedule();
  });
  document.addEventListener('visibilitychange', () => (document.hidden ? clearTimeout(timer) : tick()));
  schedule();
})();`;

/** The Content-Security-Policy source that allows the live script, and no other. */
export const LIVE_SCRIPT_SOURCE = `'sha256-${createHash('sha256').update(LIVE_SCRIPT).digest('base64')}'`;

export function layout(ctx: PageContext, active: string, title: string, body: string): string {
  const seconds = ctx.refreshSeconds ?? 0;
  const refresh = seconds ? `<noscript><meta http-equiv="refresh" content="${seconds}"></noscript>` : '';
  // The toggle is for the script: it stays hidden until the script shows it.
  const toggle = seconds ? `<label class="live" hidden><input type="checkbox" id="live" checked> refresh every ${seconds}s</label>` : '';
  // After <main>, which the script reads as it starts.
  const script = seconds ? `<script>${LIVE_SCRIPT}</script>` : '';
  const nav = NAV.map(([href, label]) => `<a href="${esc(ctx.base + href)}"${href === active ? ' class="on"' : ''}>${label}</a>`).join('');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">${refresh}
<title>${esc(title)} · Stampeded</title><style>${STYLE}</style></head>
<body><header><span class="brand">Stampeded</span>${nav}${ctx.readOnly ? '<span class="tag">read-only</span>' : ''}${toggle}</header>
<main data-refresh="${seconds}"><h1>${esc(title)}</h1>${body}</main>${script}</body></html>`;
}

/** A one-button form posting an action; absent in read-only mode. */
export function actionButton(ctx: PageContext, action: string, label: string, back: string, extra: Record<string, string> = {}): string {
  if (ctx.readOnly) return '';
  const fields = Object.entries({ _csrf: ctx.csrf, _back: back, ...extra })
    .map(([k, v]) => `<input type="hidden" name="${esc(k)}" value="${esc(v)}">`)
    .join('');
  return `<form class="inline" method="post" action="${esc(ctx.base + action)}">${fields}<button type="submit">${esc(label)}</button></form>`;
}
