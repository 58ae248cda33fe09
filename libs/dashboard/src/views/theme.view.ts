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
} as const satisfies Record<string, readonly [light: string, dark: string]>;

/**
 * The colour of each job state and attempt outcome, the one place they are
 * named: tags, the attempt timeline and any drawing of jobs take theirs
 * from here (class `state-<name>` sets `--state` for its element). A state
 * is never told by colour alone: its name is written beside it.
 */
export const STATE_COLOURS: Record<JobState | AttemptOutcome, readonly [light: string, dark: string]> = {
  pending: ['#6b7280', '#9aa3b2'],
  available: ['#2f6fdb', '#6ea2ff'],
  claimed: ['#6a4fc9', '#a893ff'],
  executing: ['#2f6fdb', '#6ea2ff'],
  running: ['#2f6fdb', '#6ea2ff'],
  retryable: ['#b26a00', '#f0a742'],
  interrupted: ['#b26a00', '#f0a742'],
  deferred: ['#8a93a3', '#7d8696'],
  completed: ['#1e7a3b', '#4cc47a'],
  failed: ['#b3261e', '#ff8a80'],
  discarded: ['#b3261e', '#ff8a80'],
  cancelled: ['#5b6475', '#a3acba'],
};

const variables = (theme: 0 | 1) =>
  [
    ...Object.entries(PALETTE).map(([name, colours]) => `--${name}:${colours[theme]}`),
    ...Object.entries(STATE_COLOURS).map(([name, colours]) => `--state-${name}:${colours[theme]}`),
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
  .map((s) => `.state-${s},.tag.${s}{--state:var(--state-${s})}`)
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
