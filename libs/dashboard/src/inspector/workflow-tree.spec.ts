import type { WorkflowJobState } from '@stampeded/nestjs';
import { workflowCountsText, workflowTree } from './workflow-tree.js';

const job = (name: string, dependsOn: string[] = [], ignore: string[] = []): WorkflowJobState => ({
  name,
  id: `id-${name}`,
  queue: 'q',
  task: 't',
  state: 'pending',
  dependsOn: dependsOn.map((d) => ({ name: d, ignoreFailure: ignore.includes(d) })),
  lastError: null,
});

const render = (jobs: WorkflowJobState[]) =>
  workflowTree(jobs).map((l) => `${'  '.repeat(l.depth)}${l.job.name}${l.repeat ? ' (above)' : ''}${l.ignoreFailure ? ' (ignore)' : ''}`);

describe('workflowTree', () => {
  it('puts the jobs nothing waits for at the top and what each waits for beneath it', () => {
    expect(render([job('a'), job('b'), job('sink', ['a', 'b'])])).toEqual(['sink', '  a', '  b']);
  });

  it('shows a shared dependency in full once and names it again after', () => {
    // a diamond: d waits for b and c, both wait for a
    expect(render([job('a'), job('b', ['a']), job('c', ['a']), job('d', ['b', 'c'])])).toEqual(['d', '  b', '    a', '  c', '    a (above)']);
  });

  it('marks the edges whose failure the job above ignores, and keeps separate roots in enqueue order', () => {
    expect(render([job('x'), job('y', ['x'], ['x']), job('lone')])).toEqual(['y', '  x (ignore)', 'lone']);
  });

  it('shows every job once even when no job is a root', () => {
    // p first in enqueue order, q beneath it, and p again below q, named and not expanded.
    expect(render([job('p', ['q']), job('q', ['p'])])).toEqual(['p', '  q', '    p (above)']);
    expect(new Set(workflowTree([job('p', ['q']), job('q', ['p'])]).map((l) => l.job.name))).toEqual(new Set(['p', 'q']));
  });
});

describe('workflowCountsText', () => {
  it('tells the counts in the order a job passes through its states, whatever order they came in', () => {
    expect(workflowCountsText({ completed: 7, cancelled: 1, pending: 3, executing: 2 })).toBe('pending 3, executing 2, completed 7, cancelled 1');
  });

  it('leaves out a state with no job, and says nothing for none', () => {
    expect(workflowCountsText({ available: 0, discarded: 2 })).toBe('discarded 2');
    expect(workflowCountsText({})).toBe('');
  });
});
