import { Inject, Injectable, UnauthorizedException, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { timingSafeEqual, createHash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { DASHBOARD_OPTIONS } from '../dashboard.constants.js';
import type { ResolvedDashboardOptions } from '../interfaces/dashboard-options.interface.js';
import type { DashboardRequest } from './dashboard-request.js';

/** Lets a request in only as the configured auth allows: basic credentials, the user's guard, or the user's function. */
@Injectable()
export class DashboardAuthGuard implements CanActivate {
  constructor(
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    private readonly moduleRef: ModuleRef,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const auth = this.options.auth;
    const request = context.switchToHttp().getRequest<DashboardRequest>();
    if (auth.kind === 'guard') return Boolean(await this.moduleRef.get(auth.guard, { strict: false }).canActivate(context));
    if (auth.kind === 'function') {
      if (await auth.check(request)) return true;
      throw new UnauthorizedException();
    }
    if (basicMatches(request.headers.authorization, auth.username, auth.password)) return true;
    context.switchToHttp().getResponse<ServerResponse>().setHeader('WWW-Authenticate', 'Basic realm="Stampeded", charset="UTF-8"');
    throw new UnauthorizedException();
  }
}

function basicMatches(header: string | undefined, username: string, password: string): boolean {
  if (!header?.startsWith('Basic ')) return false;
  const decoded = Buffer.from(header.slice(6).trim(), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return false;
  // Compared as hashes so that neither the length nor the content leaks through timing.
  const same = (a: string, b: string) => timingSafeEqual(sha(a), sha(b));
  return same(decoded.slice(0, colon), username) && same(decoded.slice(colon + 1), password);
}

function sha(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
