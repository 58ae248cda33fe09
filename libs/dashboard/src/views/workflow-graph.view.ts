import type { WorkflowJobState } from '@stampeded/nestjs';
import { layoutWorkflow } from '../inspector/workflow-layout.js';
import { esc, query } from './html.js';
import { STATE_COLOURS, stateClass } from './theme.view.js';

/**
 * Past these a graph is a wall of boxes and lines no one reads (and its
 * crossing count costs more than the page): the page shows the tree instead
 * and says why.
 */
export const GRAPH_MAX_JOBS = 200;
export const GRAPH_MAX_EDGES = 1000;

const NODE_W = 176;
const NODE_H = 40;
const COLUMN_GAP = 72;
const ROW_GAP = 14;
const PAD = 12;
const NAME_CHARS = 24;

/** States in which a job ends its dependents unless their edge ignores its failure (stampeded_workflow_advance). */
const ENDS_DEPENDENTS = new Set(['discarded', 'cancelled']);

/** Why the graph is not drawn for this workflow, or null when it is. */
export function graphTooLarge(jobs: readonly WorkflowJobState[]): string | null {
  const edges = jobs.reduce((n, j) => n + j.dependsOn.length, 0);
  if (jobs.length > GRAPH_MAX_JOBS) return `It has ${jobs.length} jobs: past ${GRAPH_MAX_JOBS} a graph is too large to read, so its jobs are shown as a tree.`;
  if (edges > GRAPH_MAX_EDGES) return `It has ${edges} dependencies: past ${GRAPH_MAX_EDGES} a graph is too dense to read, so its jobs are shown as a tree.`;
  return null;
}

/**
 * The dependencies that cancelled a cancelled job: those it did not ignore
 * the failure of, and that were discarded or cancelled. None for a job
 * cancelled by hand (or with the workflow).
 */
export function cancelledBy(job: WorkflowJobState, byName: ReadonlyMap<string, WorkflowJobState>): string[] {
  if (job.state !== 'cancelled') return [];
  return job.dependsOn.filter((d) => !d.ignoreFailure && ENDS_DEPENDENTS.has(byName.get(d.name)?.state ?? '')).map((d) => d.name);
}

/**
 * A workflow as a graph, inline SVG with no script: its jobs as boxes in
 * columns by dependency depth (layoutWorkflow()), each coloured by its state
 * and linked to its job's page, an arrow from each job to the jobs that wait
 * for it. An edge whose failure the waiting job ignores is dashed; the edge
 * of a failure that cancelled a job is red, and the cancelled job names the
 * dependency that ended it.
 */
export function workflowGraph(base: string, jobs: readonly WorkflowJobState[]): string {
  const byName = new Map(jobs.map((j) => [j.name, j]));
  const layout = layoutWorkflow(jobs);
  const rows = Math.max(1, ...layout.layers.map((l) => l.length));
  const width = PAD * 2 + layout.layers.length * NODE_W + (layout.layers.length - 1) * COLUMN_GAP;
  const height = PAD * 2 + rows * NODE_H + (rows - 1) * ROW_GAP;
  const at = new Map(layout.nodes.map((n) => [n.name, { x: PAD + n.layer * (NODE_W + COLUMN_GAP), y: PAD + n.order * (NODE_H + ROW_GAP) }]));

  const edges = layout.edges
    .map(({ from, to }) => {
      const [a, b] = [at.get(from)!, at.get(to)!];
      const ignore = byName.get(to)!.dependsOn.some((d) => d.name === from && d.ignoreFailure);
      const cancelling = cancelledBy(byName.get(to)!, byName).includes(from);
      const kind = cancelling ? 'cancelled-by' : ignore ? 'ignore-failure' : 'waits-for';
      const [x1, y1, x2, y2] = [a.x + NODE_W, a.y + NODE_H / 2, b.x - 4, b.y + NODE_H / 2];
      const words = cancelling ? `${from} failing cancelled ${to}` : ignore ? `${to} runs even if ${from} fails` : `${to} waits for ${from}`;
      return `<path class="edge ${kind}" data-from="${esc(from)}" data-to="${esc(to)}" d="${edgePath(x1, y1, x2, y2, b.y)}" fill="none" stroke-width="${cancelling ? 2 : 1.4}"${ignore ? ' stroke-dasharray="5 4"' : ''} marker-end="url(#wf-arrow-${cancelling ? 'red' : 'grey'})"><title>${esc(words)}</title></path>`;
    })
    .join('');

  const nodes = layout.nodes
    .map(({ name }) => {
      const job = byName.get(name)!;
      const { x, y } = at.get(name)!;
      const blockers = cancelledBy(job, byName);
      const note = blockers.length ? `cancelled: ${blockers.join(', ')} ${byName.get(blockers[0])!.state}` : job.state;
      const label = `${name}: ${note}${job.task ? `, task ${job.task}` : ''}`;
      const shown = name.length > NAME_CHARS ? `${name.slice(0, NAME_CHARS - 1)}…` : name;
      const box = `<g class="node" data-name="${esc(name)}" data-state="${esc(job.state)}"${blockers.length ? ` data-cancelled-by="${esc(blockers.join(' '))}"` : ''}>
<title>${esc(label)}${job.lastError ? `\n${esc(job.lastError)}` : ''}</title>
<rect class="${stateClass(job.state)}" x="${x}" y="${y}" width="${NODE_W}" height="${NODE_H}" rx="5" stroke-width="${job.state === 'discarded' ? 2.5 : 1.5}"${job.state === 'removed' ? ' stroke-dasharray="4 3"' : ''}/>
<text x="${x + 8}" y="${y + 16}" font-size="12" font-weight="600">${esc(shown)}</text>
<text x="${x + 8}" y="${y + 31}" font-size="11" class="${blockers.length ? 'note blocked' : 'note'}">${esc(note.length > 30 ? `${note.slice(0, 29)}…` : note)}</text></g>`;
      // A removed job's row is gone: there is no page to link to.
      return job.state === 'removed' ? box : `<a href="${esc(`${base}/jobs/${job.id}${query({ queue: job.queue })}`)}" aria-label="${esc(label)}">${box}</a>`;
    })
    .join('\n');

  const arrow = (id: string) =>
    `<marker id="${id}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0 0L10 5L0 10z"/></marker>`;
  const failed = jobs.filter((j) => j.state === 'discarded').length;
  const cancelled = jobs.filter((j) => cancelledBy(j, byName).length).length;
  const summary = `${jobs.length} jobs in ${layout.layers.length} columns by dependency${failed ? `; ${failed} discarded` : ''}${cancelled ? `, ${cancelled} cancelled by a dependency's failure` : ''}`;
  const svg = `<svg class="workflow-graph" role="group" aria-label="${esc(summary)}" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" xmlns="http://www.w3.org/2000/svg">
<defs>${arrow('wf-arrow-grey')}${arrow('wf-arrow-red')}</defs>
${edges}
${nodes}</svg>`;
  return `<div class="graph-box">${svg}</div>${legend(jobs)}`;
}

/**
 * An edge to the next column is one curve. One that skips columns would run
 * through the boxes between, so it leaves its column, runs along the gap
 * between two rows (every box of a row sits at the same height, so a gap is
 * clear in every column) and comes back to its job in the column before it.
 */
function edgePath(x1: number, y1: number, x2: number, y2: number, targetTop: number): string {
  if (x2 - x1 <= COLUMN_GAP) {
    const bend = Math.max(24, (x2 - x1) / 2);
    return `M${x1} ${y1} C${x1 + bend} ${y1} ${x2 - bend} ${y2} ${x2} ${y2}`;
  }
  const lane = y2 >= y1 ? targetTop - ROW_GAP / 2 : targetTop + NODE_H + ROW_GAP / 2;
  const out = x1 + COLUMN_GAP - 8;
  const back = x2 - COLUMN_GAP + 12;
  const half = (COLUMN_GAP - 8) / 2;
  return `M${x1} ${y1} C${x1 + half} ${y1} ${x1 + half} ${lane} ${out} ${lane} L${back} ${lane} C${x2 - half} ${lane} ${x2 - half} ${y2} ${x2} ${y2}`;
}

function legend(jobs: readonly WorkflowJobState[]): string {
  const present = Object.keys(STATE_COLOURS).filter((s) => jobs.some((j) => j.state === s));
  const swatch = (state: string) => `<span class="swatch ${stateClass(state)}"></span> ${esc(state)}`;
  return `<p class="dim legend">${present.map(swatch).join(' &nbsp; ')} &nbsp;·&nbsp; an arrow runs from a job to the jobs waiting for it; dashed: runs even if it fails; red: its failure cancelled the job it points to. Each box links to its job's page.</p>`;
}
