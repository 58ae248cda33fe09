// Runs jest and ends with one plain line that CI reads:
//   tests: N passed, N failed
// computed from jest's JSON result, not from its exit code or its summary. A
// run in which fewer test files reported than exist, or none ran, fails.
//
// With no test files named, the whole suite runs on PostgreSQL 18 and then
// the focused suite (test/versions/) on each older major, each on one server
// of that version started by the test setup (STAMPEDED_TEST_PG); the last
// line sums every run. `--pg 16` runs what is named (the focused suite when
// nothing is) on that major only.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';

const OLDER_MAJORS = [14, 15, 16, 17];
const FOCUSED = ['test/versions/'];

const env = { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --experimental-vm-modules`.trim() };
const jest = 'node_modules/jest/bin/jest.js';
let extra = process.argv.slice(2);
const pgAt = extra.indexOf('--pg');
const onlyMajor = pgAt >= 0 ? Number(extra[pgAt + 1]) : undefined;
if (pgAt >= 0) extra = [...extra.slice(0, pgAt), ...extra.slice(pgAt + 2)];
if (onlyMajor !== undefined && !OLDER_MAJORS.includes(onlyMajor) && onlyMajor !== 18) {
  console.log(`--pg takes one of ${[...OLDER_MAJORS, 18].join(', ')}`);
  process.exit(2);
}
const namesFiles = extra.some((a) => !a.startsWith('-'));
mkdirSync('.test-results', { recursive: true });

/** One jest run on one server; returns its counts and the problems found in its result. */
function runJest(label, args, major) {
  const out = `.test-results/jest${major ? `-pg${major}` : ''}.json`;
  rmSync(out, { force: true });
  const runEnv = major ? { ...env, STAMPEDED_TEST_PG: String(major) } : env;
  const listed = spawnSync(process.execPath, [jest, '--listTests', '--json', ...args], { env: runEnv, encoding: 'utf8' });
  const expectedFiles = listed.status === 0 ? JSON.parse(listed.stdout.trim().split('\n').pop()).length : NaN;
  if (label) console.log(`\n${label}`);
  const run = spawnSync(process.execPath, [jest, '--json', `--outputFile=${out}`, ...args], { env: runEnv, stdio: 'inherit' });
  let result;
  try {
    result = JSON.parse(readFileSync(out, 'utf8'));
  } catch {
    return { passed: 0, failed: 0, status: run.status, problems: [`${label || 'the run'}: jest wrote no result file; the run did not complete`] };
  }
  const problems = [];
  const where = label ? `${label}: ` : '';
  if (result.numRuntimeErrorTestSuites > 0) problems.push(`${where}${result.numRuntimeErrorTestSuites} test file(s) failed to run`);
  if (result.numFailedTestSuites > 0 && result.numFailedTests === 0) problems.push(`${where}${result.numFailedTestSuites} test file(s) failed outside a test`);
  if (Number.isFinite(expectedFiles) && result.numTotalTestSuites !== expectedFiles) {
    problems.push(`${where}${expectedFiles} test files exist but ${result.numTotalTestSuites} reported`);
  }
  if (result.numTotalTests === 0) problems.push(`${where}no test ran`);
  if (label) console.log(`${label}: ${result.numPassedTests} passed, ${result.numFailedTests} failed`);
  return { passed: result.numPassedTests, failed: result.numFailedTests, status: run.status, problems };
}

const runs = [];
if (onlyMajor !== undefined) {
  runs.push(runJest(`PostgreSQL ${onlyMajor}`, namesFiles ? extra : [...extra, ...FOCUSED], onlyMajor === 18 ? undefined : onlyMajor));
} else {
  runs.push(runJest('', extra));
  if (!namesFiles) for (const major of OLDER_MAJORS) runs.push(runJest(`PostgreSQL ${major}, the focused suite`, [...extra, ...FOCUSED], major));
}

const passed = runs.reduce((n, r) => n + r.passed, 0);
const failed = runs.reduce((n, r) => n + r.failed, 0);
const problems = runs.flatMap((r) => r.problems);
for (const p of problems) console.log(`problem: ${p}`);
const failedCount = failed + (problems.length && failed === 0 ? 1 : 0);
console.log(`tests: ${passed} passed, ${failedCount} failed`);
process.exit(failedCount > 0 || runs.some((r) => r.status !== 0 && r.failed > 0) ? 1 : 0);
