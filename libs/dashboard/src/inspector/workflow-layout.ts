/** A node as the layout needs it: its name and the names it waits for. */
export interface LayoutInput {
  name: string;
  dependsOn: readonly { name: string }[];
}

export interface LayoutNode {
  name: string;
  /** Its column: the longest chain of dependencies below it (0 for a job that waits for nothing). */
  layer: number;
  /** Its row in its column, from 0. */
  order: number;
}

export interface WorkflowLayout {
  nodes: LayoutNode[];
  /** Columns of names, each in its order. */
  layers: string[][];
  /** One per dependency whose job is in the workflow: `from` is waited for by `to`. */
  edges: { from: string; to: string }[];
}

/** How many times the order is swept down and back up; crossings stop falling after a few on the shapes workflows take. */
const SWEEPS = 4;

/**
 * A workflow laid out in layers, the way Sugiyama's method starts: each job
 * in the column of its longest chain of dependencies, so every edge points
 * forward, then each column ordered by the mean row of its neighbours (the
 * barycenter heuristic), swept forward on the dependencies and back on the
 * dependents, keeping the order that crossed least. No dummy nodes: an edge
 * that skips columns is drawn as a curve over them, which costs a few
 * crossings the heuristic does not see and keeps this small. Jobs keep
 * their enqueue order where nothing decides. A cycle (which enqueueWorkflow
 * refuses) leaves the jobs in it in the column reached so far rather than
 * looping.
 */
export function layoutWorkflow(jobs: readonly LayoutInput[]): WorkflowLayout {
  const names = new Set(jobs.map((j) => j.name));
  const deps = new Map(jobs.map((j) => [j.name, unique(j.dependsOn.map((d) => d.name).filter((d) => names.has(d) && d !== j.name))]));
  const dependents = new Map(jobs.map((j) => [j.name, [] as string[]]));
  for (const [name, ds] of deps) for (const d of ds) dependents.get(d)!.push(name);

  const layerOf = new Map<string, number>();
  const visiting = new Set<string>();
  const layer = (name: string): number => {
    const known = layerOf.get(name);
    if (known !== undefined) return known;
    if (visiting.has(name)) return 0;
    visiting.add(name);
    const value = Math.max(-1, ...deps.get(name)!.map(layer)) + 1;
    visiting.delete(name);
    layerOf.set(name, value);
    return value;
  };
  const layers: string[][] = [];
  for (const job of jobs) (layers[layer(job.name)] ??= []).push(job.name);
  for (let i = 0; i < layers.length; i++) layers[i] ??= [];

  const edges = jobs.flatMap((j) => deps.get(j.name)!.map((from) => ({ from, to: j.name })));
  let best = layers.map((l) => [...l]);
  let fewest = crossings(best, edges);
  const current = layers.map((l) => [...l]);
  for (let sweep = 0; sweep < SWEEPS && fewest > 0; sweep++) {
    for (let i = 1; i < current.length; i++) current[i] = byBarycenter(current[i], deps, rowsOf(current));
    for (let i = current.length - 2; i >= 0; i--) current[i] = byBarycenter(current[i], dependents, rowsOf(current));
    const n = crossings(current, edges);
    if (n < fewest) {
      fewest = n;
      best = current.map((l) => [...l]);
    }
  }
  const nodes = best.flatMap((column, l) => column.map((name, order) => ({ name, layer: l, order })));
  return { nodes, layers: best, edges };
}

/** Pairs of edges that cross, counted between each pair of adjacent columns and for edges that skip columns by where they start and end. */
export function crossings(layers: readonly (readonly string[])[], edges: readonly { from: string; to: string }[]): number {
  const rows = rowsOf(layers);
  const column = new Map(layers.flatMap((l, i) => l.map((n): [string, number] => [n, i])));
  // Only edges between the same two columns can cross as drawn; grouping them keeps this from comparing every pair.
  const groups = new Map<string, { from: number; to: number }[]>();
  for (const e of edges) {
    const key = `${column.get(e.from)}>${column.get(e.to)}`;
    let group = groups.get(key);
    if (!group) groups.set(key, (group = []));
    group.push({ from: rows.get(e.from)!, to: rows.get(e.to)! });
  }
  let count = 0;
  for (const group of groups.values())
    for (let a = 0; a < group.length; a++)
      for (let b = a + 1; b < group.length; b++) if ((group[a].from - group[b].from) * (group[a].to - group[b].to) < 0) count++;
  return count;
}

function rowsOf(layers: readonly (readonly string[])[]): Map<string, number> {
  return new Map(layers.flatMap((l) => l.map((n, i): [string, number] => [n, i])));
}

/** A column ordered by the mean row of each job's neighbours; a job with none keeps its row (a stable sort keeps ties in their order). */
function byBarycenter(column: readonly string[], neighbours: Map<string, string[]>, rows: Map<string, number>): string[] {
  const weight = new Map(
    column.map((name, i) => {
      const near = neighbours.get(name)!.map((n) => rows.get(n)!);
      return [name, near.length ? near.reduce((s, r) => s + r, 0) / near.length : i];
    }),
  );
  return [...column].sort((a, b) => weight.get(a)! - weight.get(b)!);
}

function unique<T>(values: T[]): T[] {
  return [...new Set(values)];
}
