import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { startPostgres } from '@stampeded/testing';
import { AppModule } from './app.module.js';
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
  app.enableShutdownHooks();
  const port = Number(process.env.PORT ?? 3000);
  await app.listen(port, '127.0.0.1');
  logger.log(`demo app listening on http://127.0.0.1:${port}`);

  let stopping = false;
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    await app.close();
    await postgres.stop();
    process.exit(code);
  };
  // enableShutdownHooks closes the app on SIGINT/SIGTERM; the database must go after it.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void stop(0));

  try {
    await app.get(DemoRunner).run();
  } catch (err) {
    logger.error(`demo failed: ${(err as Error).stack ?? err}`);
    await stop(1);
  }
  if (once) await stop(0);
  else logger.log('demo done; still serving and working. Ctrl-C stops it (the worker drains first).');
}

void main();
