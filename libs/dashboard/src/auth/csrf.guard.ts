import { ForbiddenException, Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { CSRF_COOKIE, CSRF_FIELD, CSRF_HEADER, DASHBOARD_OPTIONS } from '../dashboard.constants.js';
import { CSRF_REJECTED, READ_ONLY } from '../dashboard.messages.js';
import type { ResolvedDashboardOptions } from '../interfaces/dashboard-options.interface.js';
import { cookieOf, type DashboardRequest } from './dashboard-request.js';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Refuses a state-changing request that another site could have made.
 *
 * Basic auth and session cookies ride along on a cross-site form post, so
 * being logged in proves nothing about who made the request. A change must
 * echo the token from this dashboard's own HttpOnly cookie (double submit):
 * another site can make the browser send the cookie but cannot read it. A
 * request whose Origin names another host is refused before that.
 */
@Injectable()
export class CsrfGuard implements CanActivate {
  constructor(@Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions) {}

  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<DashboardRequest>();
    if (SAFE_METHODS.has(request.method ?? 'GET')) {
      ensureCsrfCookie(request, context.switchToHttp().getResponse<ServerResponse>(), this.options.path);
      return true;
    }
    if (this.options.readOnly) throw new ForbiddenException(READ_ONLY());
    const origin = request.headers.origin;
    if (origin && origin !== 'null') {
      let host: string | undefined;
      try {
        host = new URL(origin).host;
      } catch {
        host = undefined;
      }
      if (host !== request.headers.host) throw new ForbiddenException(CSRF_REJECTED());
    } else if (origin === 'null') {
      throw new ForbiddenException(CSRF_REJECTED());
    }
    const cookie = cookieOf(request, CSRF_COOKIE);
    const header = request.headers[CSRF_HEADER];
    const sent = typeof header === 'string' ? header : typeof request.body?.[CSRF_FIELD] === 'string' ? (request.body[CSRF_FIELD] as string) : undefined;
    if (!cookie || !sent || cookie.length !== sent.length || !timingSafeEqual(Buffer.from(cookie), Buffer.from(sent))) {
      throw new ForbiddenException(CSRF_REJECTED());
    }
    return true;
  }
}

/** The request's CSRF token, issuing one in a cookie when it has none. */
export function ensureCsrfCookie(request: DashboardRequest, response: ServerResponse, path: string): string {
  const existing = cookieOf(request, CSRF_COOKIE);
  if (existing && /^[A-Za-z0-9_-]{43}$/.test(existing)) return existing;
  const token = randomBytes(32).toString('base64url');
  const secure = (request.socket as { encrypted?: boolean }).encrypted || request.headers['x-forwarded-proto'] === 'https';
  response.setHeader('Set-Cookie', `${CSRF_COOKIE}=${token}; Path=${path || '/'}; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`);
  // Later reads in this request (the page that embeds it) see the same token.
  request.headers.cookie = `${request.headers.cookie ? `${request.headers.cookie}; ` : ''}${CSRF_COOKIE}=${token}`;
  return token;
}
