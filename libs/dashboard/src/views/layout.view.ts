import type { ReplicaStatus } from '@stampeded/nestjs/internal';
import { esc } from './html.js';
import { replicaView } from './replica.view.js';
import { instanceBase } from '../instances/instance-base.js';
import { scriptSource, THEME_CSS, THEME_SCRIPT } from './theme.view.js';

export interface PageContext {
  /** Where the dashboard is mounted, e.g. '/stampeded'. */
  base: string;
  csrf: string;
  readOnly: boolean;
  refreshSeconds?: number;
  /** How far behind the replica the page read is; absent or null when it read the primary by configuration. */
  replica?: ReplicaStatus | null;
  /** The app's instances, when it has several databases: the switcher's links, each to the same page of that instance. */
  instances?: { current: string; names: string[]; root: string };
}

const NAV: [string, string][] = [
  ['', 'Queues'],
  ['/insights', 'Insights'],
  ['/jobs', 'Jobs'],
  ['/errors', 'Errors'],
  ['/schedules', 'Schedules'],
  ['/workflows', 'Workflows'],
  ['/workers', 'Workers'],
  ['/health', 'Health'],
];

// Pages are rendered here and actions are plain form posts: everything works
// without a script. Two constant inline scripts, allowed by their hashes
// alone, apply the reader's theme and refresh a live page in place; without
// them the page follows the system's theme and a live page reloads itself
// (the <noscript> refresh). Colours come from the theme's custom properties
// (theme.view.ts) only.
const STYLE = `${THEME_CSS}
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:var(--text);background:var(--bg)}
a{color:var(--link)}
:focus-visible{outline:3px solid var(--focus);outline-offset:2px}
.skip{position:absolute;left:8px;top:-60px;z-index:10;background:var(--surface);color:var(--link);padding:8px 12px;border:2px solid var(--focus)}
.skip:focus{top:8px}
.sr-only{position:absolute;width:1px;height:1px;padding:0;margin:-1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap;border:0}
header{background:var(--header-bg);color:var(--header-text);padding:8px 20px;display:flex;flex-wrap:wrap;gap:6px 18px;align-items:center}
header :focus-visible{outline-color:var(--header-focus)}
header nav.instances{display:flex;gap:6px;align-items:baseline;padding-right:14px;border-right:1px solid var(--header-text)}header nav.instances>span{opacity:.7}header nav.instances a[aria-current]{font-weight:600}
header nav ul{display:flex;flex-wrap:wrap;gap:4px 16px;margin:0;padding:0;list-style:none}
header a{color:var(--header-text);text-decoration:none;display:inline-block;padding:4px 0}header a[aria-current=page]{color:var(--header-strong);font-weight:600;text-decoration:underline;text-underline-offset:4px}
header .brand{font-weight:700;color:var(--header-strong);margin-right:12px}
header .tools{margin-left:auto;display:flex;flex-wrap:wrap;gap:6px 14px;align-items:center;font-size:13px}
header label{cursor:pointer}header select{font:inherit}
main{padding:16px 20px;max-width:100%;box-sizing:border-box}main:focus{outline:none}
h1{font-size:20px;margin:4px 0 14px;overflow-wrap:anywhere}h2{font-size:16px;margin:20px 0 8px}
.scroll{overflow-x:auto;margin-bottom:12px;max-width:100%}
table{border-collapse:collapse;background:var(--surface);width:100%}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid var(--border);vertical-align:top}
thead th{font-size:12px;text-transform:uppercase;color:var(--muted)}
tbody th{font-weight:600;white-space:nowrap}
td{overflow-wrap:break-word}td code{white-space:nowrap}
.dim{color:var(--muted)}.bad{color:var(--bad);font-weight:600}.ok{color:var(--ok)}
pre{background:var(--surface);border:1px solid var(--border);padding:8px;overflow:auto;max-height:300px}
pre.error{border-left:4px solid var(--bad)}h2 .dim{font-weight:400;font-size:13px}
p.replica{margin:-8px 0 12px;font-size:13px}
details.json summary{cursor:pointer;color:var(--link);margin-bottom:4px}details.json pre{max-height:600px}
form.inline{display:inline}button{cursor:pointer;padding:3px 10px;font:inherit;overflow-wrap:normal}
input,select,button,textarea{font:inherit}
.filters p{margin:0 0 6px;display:flex;flex-wrap:wrap;gap:6px 10px;align-items:center}.filters label{font-size:13px;color:var(--muted)}.filters input,.filters select{margin-left:2px;max-width:100%}
.chart{background:var(--surface);border:1px solid var(--border);max-width:100%;height:auto}
.chart text{fill:var(--muted)}.chart .axis{stroke:var(--axis)}.chart .bar{fill:var(--chart)}.chart .due{stroke:var(--chart)}.chart .span{fill:var(--state)}.chart .line{fill:none;stroke:var(--state);stroke-width:1.6}
.outcome{border-left:4px solid var(--state);padding-left:4px}
.graph-box{overflow:auto;background:var(--surface);border:1px solid var(--border)}
.workflow-graph .node rect{fill:var(--state-fill);stroke:var(--state)}.workflow-graph text{fill:var(--text)}.workflow-graph text.note{fill:var(--muted)}.workflow-graph text.blocked{fill:var(--bad)}
.workflow-graph .edge{stroke:var(--line)}.workflow-graph .edge.cancelled-by{stroke:var(--state-discarded)}#wf-arrow-grey path{fill:var(--line)}#wf-arrow-red path{fill:var(--state-discarded)}
.swatch{display:inline-block;width:11px;height:11px;vertical-align:-1px;border:1.5px solid var(--state);background:var(--state-fill);border-radius:2px}
.tag{display:inline-block;padding:0 6px;border-radius:8px;background:var(--tag-bg);color:var(--text);font-size:12px}
.tag.hold{background:var(--hold-bg);color:var(--hold-text)}.tag.encrypted{background:var(--encrypted-bg);color:var(--encrypted-text)}.tag.rush{background:var(--rush-bg);color:var(--rush-text)}
progress{width:160px;max-width:40vw;vertical-align:middle;margin-right:6px}
a.button{display:inline-block;padding:2px 10px;border:1px solid var(--border);border-radius:3px;background:var(--surface);color:var(--text);text-decoration:none}
@media (max-width:600px){header{padding:8px 12px}main{padding:12px}header .tools{margin-left:0}
table.cards thead{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}
table.cards tr{display:block;border-bottom:2px solid var(--border);padding:4px 0}
table.cards td{display:block;position:relative;border:0;padding:2px 8px 2px calc(34% + 10px);min-height:1.45em}
table.cards td::before{content:attr(data-label);position:absolute;left:8px;width:34%;overflow-wrap:anywhere;color:var(--muted);font-size:12px;text-transform:uppercase}}
`;

/**
 * Refreshes a live page in place: every main[data-refresh] seconds it fetches
 * the page and swaps its <main> in (no flicker, open folds kept open). It
 * waits while the tab is hidden, while the operator types in a form or has
 * text selected, and when the header toggle is off (remembered per browser).
 * A page whose fresh copy is no longer live (a job that finished) stops it.
 * Focus stays where the reader had it (the same control in the fresh copy),
 * and the polite status region speaks only when the page's summary
 * (main[data-summary]: a job's state, the queues on hold) changes, not on
 * every refresh.
 */
const LIVE_SCRIPT = `(() => {
  const box = document.getElementById('live');
  if (!box) return;
  const toggle = box.closest('label');
  const status = document.getElementById('live-status');
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
          const old = document.querySelector('main');
          const open = [...old.querySelectorAll('details')].map((d) => d.open);
          const focusables = (root) => [...root.querySelectorAll('a[href], button, input, select, textarea, summary, [tabindex]')];
          const focused = old.contains(document.activeElement) ? document.activeElement : null;
          const same = (a, b) => a.tagName === b.tagName && a.getAttribute('href') === b.getAttribute('href') && a.textContent === b.textContent;
          const at = focused ? focusables(old).indexOf(focused) : -1;
          old.replaceWith(document.adoptNode(main));
          main.querySelectorAll('details').forEach((d, i) => { if (open[i]) d.open = true; });
          if (focused) {
            const candidates = focusables(main);
            (candidates.find((c) => same(c, focused)) || candidates[at] || main).focus({ preventScroll: true });
          }
          if (status && main.dataset.summary && main.dataset.summary !== old.dataset.summary) status.textContent = main.dataset.summary;
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

/** The Content-Security-Policy sources that allow the page's two scripts, and no other. */
export const PAGE_SCRIPT_SOURCES = [scriptSource(THEME_SCRIPT), scriptSource(LIVE_SCRIPT)].join(' ');

/**
 * A dashboard page: a skip link, the header (brand, navigation, the theme
 * switch and the live toggle), then <main> with the page's one h1. The
 * summary, when the page gives one, is what the live refresh announces
 * when it changes (see LIVE_SCRIPT).
 */
export function layout(ctx: PageContext, active: string, title: string, body: string, summary = ''): string {
  const seconds = ctx.refreshSeconds ?? 0;
  const refresh = seconds ? `<noscript><meta http-equiv="refresh" content="${seconds}"></noscript>` : '';
  // The toggles are for the scripts: each stays hidden until its script shows it.
  const live = seconds
    ? `<label class="live" hidden><input type="checkbox" id="live" checked> refresh every ${seconds}s</label><span id="live-status" class="sr-only" role="status" aria-live="polite"></span>`
    : '';
  const theme =
    '<label class="theme" hidden>theme <select id="theme"><option value="">as the system</option><option value="light">light</option><option value="dark">dark</option></select></label>';
  // After <main>, which the script reads as it starts.
  const script = seconds ? `<script>${LIVE_SCRIPT}</script>` : '';
  const nav = NAV.map(([href, label]) => `<li><a href="${esc(ctx.base + href)}"${href === active ? ' aria-current="page"' : ''}>${label}</a></li>`).join('');
  const readOnly = ctx.readOnly ? '<span class="tag">read-only</span>' : '';
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">${refresh}
<title>${esc(title)} · Stampeded</title><script>${THEME_SCRIPT}</script><style>${STYLE}</style></head>
<body><a class="skip" href="#main">Skip to content</a>
<header><span class="brand">Stampeded</span>${instanceSwitcher(ctx, active)}<nav aria-label="Dashboard"><ul>${nav}</ul></nav><div class="tools">${readOnly}${theme}${live}</div></header>
<main id="main" tabindex="-1" data-refresh="${seconds}"${summary ? ` data-summary="${esc(summary)}"` : ''}><h1>${esc(title)}</h1>${replicaView(ctx.replica)}${body}</main>${script}</body></html>`;
}

/**
 * Links to the same page of each instance, in an app with several databases;
 * nothing in an app with one. The default instance's pages keep the
 * dashboard's own path; a named one's are under /instances/<name>.
 */
function instanceSwitcher(ctx: PageContext, active: string): string {
  const instances = ctx.instances;
  if (!instances || instances.names.length < 2) return '';
  const links = instances.names.map((name) => {
    const base = instanceBase(instances.root, name);
    const current = name === instances.current ? ' aria-current="true"' : '';
    return `<li><a href="${esc(base + active || '/')}"${current}>${esc(name)}</a></li>`;
  });
  return `<nav aria-label="Instances" class="instances"><span>instance</span><ul>${links.join('')}</ul></nav>`;
}

/** A one-button form posting an action; absent in read-only mode. */
export function actionButton(ctx: PageContext, action: string, label: string, back: string, extra: Record<string, string> = {}): string {
  if (ctx.readOnly) return '';
  const fields = Object.entries({ _csrf: ctx.csrf, _back: back, ...extra })
    .map(([k, v]) => `<input type="hidden" name="${esc(k)}" value="${esc(v)}">`)
    .join('');
  return `<form class="inline" method="post" action="${esc(ctx.base + action)}">${fields}<button type="submit">${esc(label)}</button></form>`;
}
