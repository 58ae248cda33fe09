import { existsSync, mkdirSync } from 'node:fs';
import type { Browser, BrowserContext } from 'playwright-core';

// Debian's chromium package, driven by playwright-core (which downloads no
// browser of its own). Where it is not installed -- CI reaches the npm
// registry only -- the browser suites are skipped, and say so in their title.
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const HAS_CHROMIUM = existsSync(CHROMIUM);
export const SCREENSHOTS = '.test-results/screenshots';

/** Where a screenshot the docs show is written: docs/images under `npm run docs:screenshots`, with the test results otherwise. */
export const docsScreenshot = (file: string) => `${process.env.STAMPEDED_DOCS_SCREENSHOTS === '1' ? 'docs/images' : SCREENSHOTS}/${file}`;

/** describe where Chromium is installed, describe.skip (saying why in the title) where it is not. */
export function describeInChromium(title: string, suite: () => void): void {
  if (HAS_CHROMIUM) describe(`${title} (${CHROMIUM})`, suite);
  else describe.skip(`${title} (skipped: no Chromium at ${CHROMIUM}; apt-get install chromium, or set CHROMIUM_PATH)`, suite);
}

/** Headless Chromium and a context logged in to the dashboard with basic auth. */
export async function openChromium(credentials: { username: string; password: string }): Promise<{ browser: Browser; context: BrowserContext }> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const { chromium } = await import('playwright-core');
  // --no-sandbox: CI and these machines run as root, where Chromium's sandbox refuses to start.
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  const context = await browser.newContext({ httpCredentials: credentials, viewport: { width: 1280, height: 860 } });
  return { browser, context };
}
