import type { Workflow } from '@stampeded/nestjs';
import { workflowCountsText, workflowTree } from '../inspector/workflow-tree.js';
import { esc, query, table } from './html.js';
import { actionButton, layout, type PageContext } from './layout.view.js';
import { jobLink, shortId } from './pages.view.js';
import { graphTooLarge, workflowGraph } from './workflow-graph.view.js';

export type WorkflowView = 'graph' | 'tree';

/**
 * One workflow: as a graph (workflowGraph()) unless it is too large to read
 * as one, or the tree was asked for; the tree is one link away at any size.
 */
export function workflowPage(ctx: PageContext, workflow: Workflow, asked: WorkflowView = 'graph'): string {
  const here = `${ctx.base}/workflows/${workflow.id}`;
  const tooLarge = graphTooLarge(workflow.jobs);
  const view: WorkflowView = asked === 'tree' || tooLarge ? 'tree' : 'graph';
  const back = `${here}${query({ view: asked === 'tree' ? 'tree' : undefined })}`;
  const cancel = workflow.state === 'running' ? actionButton(ctx, `/actions/workflows/${workflow.id}/cancel`, 'Cancel every unfinished job', back) : '';
  const head = `<p><code>${esc(workflow.id)}</code> · ${esc(workflow.kind)} · <span class="tag">${esc(workflow.state)}</span> · ${esc(workflowCountsText(workflow.counts))} ${cancel}</p>`;
  const tab = (name: WorkflowView, label: string) =>
    name === view
      ? `<strong aria-current="page">${label}</strong>`
      : tooLarge && name === 'graph'
        ? `<span class="dim">${label}</span>`
        : `<a href="${esc(`${here}${query({ view: name === 'tree' ? 'tree' : undefined })}`)}">${label}</a>`;
  const tabs = `<p class="tabs">${tab('graph', 'Graph')} · ${tab('tree', 'Tree')}</p>`;
  const body =
    view === 'graph' ? workflowGraph(ctx.base, workflow.jobs) : `${tooLarge ? `<p class="too-large">${esc(tooLarge)}</p>` : ''}${treeTable(ctx, workflow)}`;
  return layout(ctx, '/workflows', `Workflow ${workflow.name}`, head + tabs + body);
}

/** The jobs as an indented tree: each job above the jobs it waits for (workflowTree()). */
function treeTable(ctx: PageContext, workflow: Workflow): string {
  const rows = workflowTree(workflow.jobs).map((line) => {
    const job = line.job;
    const indent = '&nbsp;&nbsp;&nbsp;&nbsp;'.repeat(line.depth) + (line.depth ? '&#8627; ' : '');
    const notes = [line.ignoreFailure ? 'runs even if this fails' : '', line.repeat ? 'shown above' : ''].filter(Boolean).join('; ');
    return [
      `<span class="tree">${indent}${esc(job.name)}</span>${notes ? ` <span class="dim">(${esc(notes)})</span>` : ''}`,
      `<span class="tag ${esc(job.state)}">${esc(job.state)}</span>`,
      esc(job.task ?? '-'),
      job.state === 'removed' ? `<code>${esc(shortId(job.id))}</code>` : jobLink(ctx, job.id, job.queue),
      job.lastError ? `<span class="dim">${esc(job.lastError)}</span>` : '',
    ];
  });
  return table(['job (above what it waits for)', 'state', 'task', 'id', 'last error'], rows, 'no jobs');
}
