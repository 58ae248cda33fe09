import { crossings, layoutWorkflow, type LayoutInput } from './workflow-layout.js';

const job = (name: string, ...dependsOn: string[]): LayoutInput => ({ name, dependsOn: dependsOn.map((d) => ({ name: d })) });

describe('layoutWorkflow', () => {
  it('puts each job in the column of its longest chain of dependencies', () => {
    // report waits for orders directly and through totals: the longer chain decides.
    const layout = layoutWorkflow([job('orders'), job('totals', 'orders'), job('report', 'orders', 'totals'), job('notify', 'report')]);
    expect(layout.layers).toEqual([['orders'], ['totals'], ['report'], ['notify']]);
    expect(layout.edges).toEqual([
      { from: 'orders', to: 'totals' },
      { from: 'orders', to: 'report' },
      { from: 'totals', to: 'report' },
      { from: 'report', to: 'notify' },
    ]);
    for (const e of layout.edges) {
      const layer = (n: string) => layout.nodes.find((x) => x.name === n)!.layer;
      expect(layer(e.from)).toBeLessThan(layer(e.to));
    }
  });

  it('keeps enqueue order where nothing decides, and gives every node its row', () => {
    const layout = layoutWorkflow([job('a'), job('b'), job('c'), job('sink', 'a', 'b', 'c')]);
    expect(layout.layers).toEqual([['a', 'b', 'c'], ['sink']]);
    expect(layout.nodes).toEqual([
      { name: 'a', layer: 0, order: 0 },
      { name: 'b', layer: 0, order: 1 },
      { name: 'c', layer: 0, order: 2 },
      { name: 'sink', layer: 1, order: 0 },
    ]);
  });

  it('orders a column by the mean row of its dependencies, taking the crossings out', () => {
    // Enqueued crossed: x2 waits for a1 (row 0), x1 for a2 (row 1).
    const jobs = [job('a1'), job('a2'), job('x1', 'a2'), job('x2', 'a1')];
    expect(
      crossings(
        [
          ['a1', 'a2'],
          ['x1', 'x2'],
        ],
        [
          { from: 'a2', to: 'x1' },
          { from: 'a1', to: 'x2' },
        ],
      ),
    ).toBe(1);
    const layout = layoutWorkflow(jobs);
    expect(layout.layers).toEqual([
      ['a1', 'a2'],
      ['x2', 'x1'],
    ]);
    expect(crossings(layout.layers, layout.edges)).toBe(0);
  });

  it('crosses less than the enqueue order on a fan-out and fan-in with its branches enqueued shuffled', () => {
    const jobs = [
      job('fetch-a'),
      job('fetch-b'),
      job('fetch-c'),
      job('parse-c', 'fetch-c'),
      job('parse-a', 'fetch-a'),
      job('parse-b', 'fetch-b'),
      job('load-b', 'parse-b'),
      job('load-c', 'parse-c'),
      job('load-a', 'parse-a'),
      job('report', 'load-a', 'load-b', 'load-c'),
    ];
    const layout = layoutWorkflow(jobs);
    const enqueueOrder = [['fetch-a', 'fetch-b', 'fetch-c'], ['parse-c', 'parse-a', 'parse-b'], ['load-b', 'load-c', 'load-a'], ['report']];
    expect(crossings(enqueueOrder, layout.edges)).toBeGreaterThan(0);
    expect(crossings(layout.layers, layout.edges)).toBe(0);
    expect(layout.layers[1]).toEqual(['parse-a', 'parse-b', 'parse-c']);
  });

  it('ignores a dependency on a job not in the list, and does not loop on a cycle', () => {
    const layout = layoutWorkflow([job('a', 'gone'), job('b', 'c'), job('c', 'b')]);
    expect(layout.edges).toEqual([
      { from: 'c', to: 'b' },
      { from: 'b', to: 'c' },
    ]);
    expect(layout.nodes.map((n) => n.name).sort()).toEqual(['a', 'b', 'c']);
  });

  it('lays out 200 jobs in layers of a batch and its callback', () => {
    const jobs = Array.from({ length: 199 }, (_, i) => job(`email-${i}`));
    jobs.push(job('callback', ...jobs.map((j) => j.name)));
    const layout = layoutWorkflow(jobs);
    expect(layout.layers.map((l) => l.length)).toEqual([199, 1]);
    expect(layout.edges).toHaveLength(199);
  });
});
