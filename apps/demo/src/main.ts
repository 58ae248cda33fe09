import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { startPostgres } from '@stampeded/testing';
import { AppModule, demoPassword } from './app.module.js';
import { DemoRunner } from './demo.runner.js';

/**
 * The demo: PostgreSQL 18 (DATABASE_URL, or an embedded server of its own),
 * an HTTP app with Stampeded, a mix of jobs run to their outcomes, and a
 * summary. `--once` exits after the summary; otherwise it keeps serving until
 * Ctrl-C, which drains the worker before the server stops.
 */
async function main(): Promise<void> {
  const logger = new Logger('demo');
  const once = process.argv.includes('--once');
  const postgres = await startPostgres();
  logger.log(`PostgreSQL: ${postgres.provider === 'url' ? 'DATABASE_URL' : `embedded PostgreSQL 18 at ${postgres.url.replace(/:[^:@/]+@/, ':***@')}`}`);
  process.env.STAMPEDED_DEMO_URL = postgres.url;

  const app = await NestFactory.create(AppModule, { logger: ['log', 'warn', 'error'] });
  const port = Number(process.env.PORT ?? 3000);
  await app.listen(port, '127.0.0.1');
  logger.log(`demo app listening on http://127.0.0.1:${port}`);
  logger.log(`dashboard: http://127.0.0.1:${port}/stampeded (user demo, password ${demoPassword()}); metrics: http://127.0.0.1:${port}/metrics`);

  let stopping = false;
  let stopTrickle = () => {};
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    stopTrickle();
    await app.close();
    await postgres.stop();
    process.exit(code);
  };
  // Not enableShutdownHooks: it re-raises the signal once the app is closed,
  // which would end the process before the database it started is stopped.
  // Here the order is explicit: drain the app, then stop PostgreSQL.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void stop(0));

  try {
    await app.get(DemoRunner).run();
  } catch (err) {
    logger.error(`demo failed: ${(err as Error).stack ?? err}`);
    await stop(1);
  }
  if (once) await stop(0);
  else {
    stopTrickle = app.get(DemoRunner).startTrickle();
    logger.log('demo done; still serving, with a trickle of new jobs every 2 s. Ctrl-C stops it (the worker drains first).');
  }
}

void main();
