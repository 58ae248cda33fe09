import { Module, type INestApplication, type Provider } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type pg from 'pg';
import type { Browser, Page } from 'playwright-core';
import { StampededModule, type StampededModuleOptions } from '@stampeded/nestjs';
import { StampededDashboardModule } from '@stampeded/dashboard';
import { createTestDatabase, type TestDatabase } from '@stampeded/testing';
import { openChromium } from './chromium.js';
import { sqlClient, testDatabase } from './test-app.js';

/** An app with the dashboard at /stampeded on a database of its own, a SQL client on it, and a logged-in Chromium page. */
export interface DashboardInChromium {
  db: TestDatabase;
  sql: pg.Client;
  app: INestApplication;
  /** The app's address, without the dashboard's path. */
  base: string;
  browser: Browser;
  page: Page;
  close(): Promise<void>;
}

/** Starts what the dashboard's browser suites share; `close()` stops it all, whatever of it started. */
export async function openDashboardInChromium(options: {
  providers: Provider[];
  worker: StampededModuleOptions['worker'];
  password: string;
  /** The server to make the app's database on (a primary of the test's own); default the run's one server. */
  server?: string;
  /** More of StampededModule's options, such as a readConnection, given the app's database. */
  stampeded?: (db: TestDatabase) => Omit<StampededModuleOptions, 'connection' | 'migrations' | 'worker'>;
  /** How often live pages refresh themselves; 0 (the default) holds every page still. */
  refreshSeconds?: number;
}): Promise<DashboardInChromium> {
  const opened: Partial<DashboardInChromium> = {};
  const close = async () => {
    await opened.browser?.close();
    await opened.app?.close();
    await opened.sql?.end();
    await opened.db?.drop();
  };
  try {
    const db = (opened.db = await (options.server ? createTestDatabase(options.server) : testDatabase()));
    @Module({
      imports: [
        StampededModule.forRoot({ ...options.stampeded?.(db), connection: { url: db.url }, migrations: 'auto', worker: options.worker }),
        StampededDashboardModule.forRoot({
          path: '/stampeded',
          auth: { username: 'ops', password: options.password },
          refreshSeconds: options.refreshSeconds ?? 0,
        }),
      ],
      providers: options.providers,
    })
    class DashboardInChromiumModule {}
    const app = (opened.app = await NestFactory.create(DashboardInChromiumModule, { logger: ['error'] }));
    await app.listen(0, '127.0.0.1');
    const base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    opened.sql = await sqlClient(db.url);
    const { browser, context } = await openChromium({ username: 'ops', password: options.password });
    opened.browser = browser;
    const page = await context.newPage();
    return { ...(opened as DashboardInChromium), base, page, close };
  } catch (err) {
    await close();
    throw err;
  }
}
