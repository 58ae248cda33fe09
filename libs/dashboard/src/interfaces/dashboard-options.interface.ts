import type { CanActivate, Type } from '@nestjs/common';
import type { IncomingMessage } from 'node:http';

export interface BasicAuthCredentials {
  username: string;
  password: string;
}

/** Decides per request; the request is the platform's (Express's) request. */
export type DashboardAuthFunction = (request: IncomingMessage) => boolean | Promise<boolean>;

/** Basic-auth credentials, a guard class (resolved by Nest, so it can inject), or a function. */
export type DashboardAuth = BasicAuthCredentials | Type<CanActivate> | DashboardAuthFunction;

export interface StampededDashboardOptions {
  /** Where the UI is mounted; the JSON API is under `<path>/api`. Default '/stampeded'. */
  path?: string;
  /** Required: the dashboard refuses to start without it. */
  auth: DashboardAuth;
  /** Show everything, change nothing: every action answers 403. */
  readOnly?: boolean;
  /**
   * Seconds between refreshes of the live pages (queues, the jobs list, an
   * unfinished job's page), swapped in place and paused while the tab is
   * hidden, with a toggle in the header; 0 turns it off. Default 5.
   */
  refreshSeconds?: number;
}

export interface ResolvedDashboardOptions {
  path: string;
  auth:
    { kind: 'basic'; username: string; password: string } | { kind: 'guard'; guard: Type<CanActivate> } | { kind: 'function'; check: DashboardAuthFunction };
  readOnly: boolean;
  refreshSeconds: number;
}
