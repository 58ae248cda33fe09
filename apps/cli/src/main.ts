#!/usr/bin/env node
import { runCli } from './cli.run.js';

// `stampeded jobs list | head` closes the pipe early: that is the reader's
// choice, not an error to crash on.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw err;
});

process.exitCode = await runCli(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env });
