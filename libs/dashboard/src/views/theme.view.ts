import { createHash } from 'node:crypto';
import type { JobState } from '@stampeded/nestjs';
import type { AttemptOutcome } from '../inspector/attempt-timeline.js';

/**
 * Every colour the dashboard paints, light and dark: pages, charts and
 * drawings name these custom properties (`var(--text)`, a `.state-failed`
 * class), never a colour of their own, so that both themes stay whole and
 * a view added later inherits them. Text colours keep at least 4.5:1
 * against the backgrounds they sit on in their theme (WCAG AA), which the
 * dashboard's accessibility test measures in the browser.
 */
const PALETTE = {
  bg: ['#f6f7f9', '#12151c'],
  surface: ['#ffffff', '#1b1f29'],
  text: ['#1d2330', '#e6e9ef'],
  muted: ['#535c6d', '#a9b1bf'],
  border: ['#d5d9e0', '#363c4a'],
  link: ['#2b4f94', '#9dbdff'],
  focus: ['#1a5fd0', '#9dbdff'],
  bad: ['#b3261e', '#ff9b91'],
  ok: ['#1c7236', '#6fd394'],
  'header-bg': ['#1d2330', '#0a0c11'],
  'header-text': ['#d3d9e6', '#c9d0de'],
  'header-strong': ['#ffffff', '#ffffff'],
  'header-focus': ['#ffd166', '#ffd166'],
  'tag-bg': ['#e8ebf1', '#2a3040'],
  'hold-bg': ['#fde2e0', '#4a1f1c'],
  'hold-text': ['#8c1d18', '#ffc1b9'],
  'encrypted-bg': ['#e3f1e6', '#1d3824'],
  'encrypted-text': ['#1d5c2c', '#aee6bd'],
  'rush-bg': ['#fff1cc', '#4a3a10'],
  'rush-text': ['#5c4500', '#ffe08a'],
  chart: ['#3a6fc4', '#6ea2ff'],
  axis: ['#c5cad3', '#4a5163'],
  line: ['#8a93a3', '#7d8696'],
} as const satisfies Record<string, readonly [light: string, dark: string]>;

/**
 * The colours of each job state and attempt outcome, the one place they are
 * named: a stroke that tells the states apart (tags' dots, the attempt
 * timeline's bars, a graph's borders) and a fill light (or, dark, deep)
 * enough for the theme's text on it (a workflow graph's boxes). Keyed by
 * the core's JobState, so a state the core adds fails to compile here until
 * it has colours; `removed` is a workflow job whose row is gone. Class
 * `state-<name>` gives an element `--state` and `--state-fill`. A state is
 * never told by colour alone: its name is written beside it.
 */
type Pair = readonly [light: string, dark: string];
export const STATE_COLOURS: Record<JobState | AttemptOutcome | 'removed', { stroke: Pair; fill: Pair }> = {
  pending: { stroke: ['#8a93a3', '#8d96a6'], fill: ['#eef0f4', '#262b36'] },
  available: { stroke: ['#3a7bd5', '#6ea2ff'], fill: ['#e3ecfb', '#1c2d4d'] },
  claimed: { stroke: ['#2a66c4', '#7fb0ff'], fill: ['#d6e4fa', '#1f3052'] },
  executing: { stroke: ['#1f4f9c', '#93bcff'], fill: ['#c9dbf8', '#223660'] },
  running: { stroke: ['#1f4f9c', '#93bcff'], fill: ['#c9dbf8', '#223660'] },
  retryable: { stroke: ['#c77700', '#f0a742'], fill: ['#fff1cc', '#3d2f0f'] },
  interrupted: { stroke: ['#c77700', '#f0a742'], fill: ['#fff1cc', '#3d2f0f'] },
  deferred: { stroke: ['#8a93a3', '#8d96a6'], fill: ['#eef0f4', '#262b36'] },
  completed: { stroke: ['#1e7a3b', '#4cc47a'], fill: ['#e3f1e6', '#173322'] },
  failed: { stroke: ['#b3261e', '#ff8a80'], fill: ['#fde2e0', '#43201d'] },
  discarded: { stroke: ['#b3261e', '#ff8a80'], fill: ['#fde2e0', '#43201d'] },
  cancelled: { stroke: ['#5b6475', '#a3acba'], fill: ['#ececec', '#2a2d33'] },
  removed: { stroke: ['#c5cad3', '#4a5163'], fill: ['#f6f7f9', '#1b1f29'] },
};

/** The class that colours an element as `state` is; a state this map does not know (a newer core's, read by an older dashboard) draws as `removed`, neutral, rather than failing. */
export const stateClass = (state: string) => `state-${Object.hasOwn(STATE_COLOURS, state) ? state : 'removed'}`;

const variables = (theme: 0 | 1) =>
  [
    ...Object.entries(PALETTE).map(([name, colours]) => `--${name}:${colours[theme]}`),
    ...Object.entries(STATE_COLOURS).map(([name, colours]) => `--state-${name}:${colours.stroke[theme]};--state-${name}-fill:${colours.fill[theme]}`),
    `color-scheme:${theme ? 'dark' : 'light'}`,
  ].join(';');

/**
 * The themes as CSS: light by default, dark where the system asks for it,
 * and either where the reader chose one (`data-theme` on <html>, set by
 * THEME_SCRIPT before the page paints).
 */
export const THEME_CSS = `:root{${variables(0)}}
@media (prefers-color-scheme: dark){:root:not([data-theme=light]){${variables(1)}}}
:root[data-theme=dark]{${variables(1)}}
${Object.keys(STATE_COLOURS)
  .map((s) => `.state-${s},.tag.${s}{--state:var(--state-${s});--state-fill:var(--state-${s}-fill)}`)
  .join('\n')}
${Object.keys(STATE_COLOURS)
  .map((s) => `.tag.${s}::before`)
  .join(',')}{content:'';display:inline-block;width:8px;height:8px;border-radius:50%;background:var(--state);margin-right:5px}`;

/**
 * Applies the reader's theme before the page paints (it runs in <head>),
 * then offers the header's theme switch: system, light or dark, remembered
 * per browser. Without a script the page follows the system's setting and
 * the switch stays hidden.
 */
export const THEME_SCRIPT = `(() => {
  const key = 'stampeded-theme';
  const apply = (theme) => {
    if (theme === 'light' || theme === 'dark') document.documentElement.dataset.theme = theme;
    else delete document.documentElement.dataset.theme;
  };
  let chosen = '';
  try { chosen = localStorage.getItem(key) || ''; } catch {}
  apply(chosen);
  document.addEventListener('DOMContentLoaded', () => {
    const select = document.getElementById('theme');
    if (!select) return;
    select.value = chosen === 'light' || chosen === 'dark' ? chosen : '';
    select.closest('label').hidden = false;
    select.addEventListener('change', () => {
      try { localStorage.setItem(key, select.value); } catch {}
      apply(select.value);
    });
  });
})();`;

export const scriptSource = (script: string) => `'sha256-${createHash('sha256').update(script).digest('base64')}'`;
