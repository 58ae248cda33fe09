// npm run audit:shipped -- npm audit of what the shipped packages bring into
// a user's app: the production and peer dependencies of @stampeded/nestjs,
// @stampeded/testing and @stampeded/dashboard, not this repository's dev
// tools (benchmark rivals, jest). Fails on any high or critical advisory,
// and -- so that CI never mistakes silence for a clean bill -- when the
// registry's audit endpoint does not answer. Ends with one line:
//   audit: N critical, N high, N moderate, N low
import { spawnSync } from 'node:child_process';

const workspaces = ['libs/stampeded', 'libs/testing', 'libs/dashboard'];
const run = spawnSync('npm', ['audit', '--json', '--omit=dev', ...workspaces.flatMap((w) => ['-w', w])], { encoding: 'utf8' });

let report;
try {
  report = JSON.parse(run.stdout);
} catch {
  report = undefined;
}
const counts = report?.metadata?.vulnerabilities;
if (!counts) {
  const reason = report?.message ?? report?.error?.summary ?? (run.stderr.trim().split('\n').pop() || `npm audit exited ${run.status}`);
  console.log(`audit endpoint gave no report: ${reason}`);
  console.log('audit: unknown');
  process.exit(2);
}

for (const [name, v] of Object.entries(report.vulnerabilities ?? {})) {
  if (v.severity === 'high' || v.severity === 'critical') {
    const via = v.via.map((x) => (typeof x === 'string' ? x : `${x.title} ${x.url ?? ''}`.trim())).join('; ');
    console.log(`${v.severity}: ${name} ${v.range} (${via})${v.fixAvailable ? ', fix available' : ''}`);
  }
}
console.log(`audit: ${counts.critical} critical, ${counts.high} high, ${counts.moderate} moderate, ${counts.low} low`);
process.exit(counts.critical + counts.high > 0 ? 1 : 0);
