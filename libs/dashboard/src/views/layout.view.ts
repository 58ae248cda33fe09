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
  ['/workers', 'Workers'],
  ['/health', 'Health'],
];

// No scripts at all: pages are rendered here and actions are plain form
// posts, so the Content-Security-Policy can forbid every script.
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
.filters input,.filters select{margin-right:6px}.chart{background:#fff;border:1px solid #e3e6eb}
.tag{display:inline-block;padding:0 6px;border-radius:8px;background:#e8ebf1;font-size:12px}
.tag.hold{background:#fde2e0;color:#8c1d18}.tag.rush{background:#fff1cc}
progress{width:160px;vertical-align:middle;margin-right:6px}
`;

export function layout(ctx: PageContext, active: string, title: string, body: string): string {
  const refresh = ctx.refreshSeconds ? `<meta http-equiv="refresh" content="${ctx.refreshSeconds}">` : '';
  const nav = NAV.map(([href, label]) => `<a href="${esc(ctx.base + href)}"${href === active ? ' class="on"' : ''}>${label}</a>`).join('');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">${refresh}
<title>${esc(title)} · Stampeded</title><style>${STYLE}</style></head>
<body><header><span class="brand">Stampeded</span>${nav}${ctx.readOnly ? '<span class="tag">read-only</span>' : ''}</header>
<main><h1>${esc(title)}</h1>${body}</main></body></html>`;
}

/** A one-button form posting an action; absent in read-only mode. */
export function actionButton(ctx: PageContext, action: string, label: string, back: string, extra: Record<string, string> = {}): string {
  if (ctx.readOnly) return '';
  const fields = Object.entries({ _csrf: ctx.csrf, _back: back, ...extra })
    .map(([k, v]) => `<input type="hidden" name="${esc(k)}" value="${esc(v)}">`)
    .join('');
  return `<form class="inline" method="post" action="${esc(ctx.base + action)}">${fields}<button type="submit">${esc(label)}</button></form>`;
}
