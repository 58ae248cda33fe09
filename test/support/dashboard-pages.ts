import { RequestMethod } from '@nestjs/common';
import { METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants.js';
import { DashboardPagesController } from '@stampeded/dashboard/internal';

/**
 * The dashboard's pages: the GET routes of its pages controller, as
 * declared ('' is the queues page, 'jobs/:id' a job's). The suites that
 * must visit every page compare their own list with this one, so a page
 * added to the controller fails them until they visit it.
 */
export function dashboardPageRoutes(): string[] {
  const proto = DashboardPagesController.prototype as unknown as Record<string, unknown>;
  return Object.getOwnPropertyNames(proto)
    .map((name) => proto[name])
    .filter((handler) => typeof handler === 'function' && Reflect.getMetadata(METHOD_METADATA, handler) === RequestMethod.GET)
    .map((handler) => String(Reflect.getMetadata(PATH_METADATA, handler as object)).replace(/^\/+|\/+$/g, ''))
    .sort();
}
