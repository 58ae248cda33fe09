import type { IncomingMessage } from 'node:http';

/** The parts of Express's request that the dashboard reads (no @types/express needed). */
export interface DashboardRequest extends IncomingMessage {
  body?: Record<string, unknown>;
  query: Record<string, unknown>;
  /** The route's parameters: `instance` on a named instance's pages. */
  params?: Record<string, string>;
}

export function cookieOf(request: IncomingMessage, name: string): string | undefined {
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return decodeURIComponent(part.slice(eq + 1).trim());
  }
  return undefined;
}
