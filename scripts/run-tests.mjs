// Runs jest and ends with one plain line that CI reads:
//   tests: N passed, N failed
// computed from jest's JSON result, not from its exit code or its summary. A
// run in which fewer test files reported than exist, or none ran, fails.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';

const out = '.test-results/jest.json';
mkdirSync('.test-results', { recursive: true });
rmSync(out, { force: true });

const env = { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --experimental-vm-modules`.trim() };
const jest = 'node_modules/jest/bin/jest.js';
const extra = process.argv.slice(2);

const listed = spawnSync(process.execPath, [jest, '--listTests', '--json', ...extra], { env, encoding: 'utf8' });
const expectedFiles = listed.status === 0 ? JSON.parse(listed.stdout.trim().split('\n').pop()).length : NaN;

const run = spawnSync(process.execPath, [jest, '--json', `--outputFile=${out}`, ...extra], { env, stdio: 'inherit' });

let result;
try {
  result = JSON.parse(readFileSync(out, 'utf8'));
} catch {
  console.log('jest wrote no result file; the run did not complete');
  console.log('tests: 0 passed, 1 failed');
  process.exit(1);
}

const passed = result.numPassedTests;
const failed = result.numFailedTests;
const problems = [];
if (result.numRuntimeErrorTestSuites > 0) problems.push(`${result.numRuntimeErrorTestSuites} test file(s) failed to run`);
if (result.numFailedTestSuites > 0 && failed === 0) problems.push(`${result.numFailedTestSuites} test file(s) failed outside a test`);
if (Number.isFinite(expectedFiles) && result.numTotalTestSuites !== expectedFiles) {
  problems.push(`${expectedFiles} test files exist but ${result.numTotalTestSuites} reported`);
}
if (result.numTotalTests === 0) problems.push('no test ran');
for (const p of problems) console.log(`problem: ${p}`);

const failedCount = failed + (problems.length && failed === 0 ? 1 : 0);
console.log(`tests: ${passed} passed, ${failedCount} failed`);
process.exit(failedCount > 0 || (run.status !== 0 && failed > 0) ? 1 : 0);
