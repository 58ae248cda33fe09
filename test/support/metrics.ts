/**
 * One metric's value from Prometheus exposition text, or undefined: the first
 * sample of `name` whose labels include `labels` (a subset), or, with no
 * labels asked for, its unlabelled sample as well.
 */
export function metricSample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name} `) && wanted.length === 0) return Number(line.slice(name.length + 1));
    if (!line.startsWith(`${name}{`)) continue;
    const have = line.slice(name.length + 1, line.indexOf('}')).split(',');
    if (wanted.every((w) => have.includes(w))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}
