import { DEFAULT_INSTANCE } from '@stampeded/nestjs/internal';

/** The URL segment of a named instance's pages: `<path>/instances/<name>/jobs`; the default instance's stay at `<path>/jobs`. */
export const INSTANCES_SEGMENT = 'instances';

/** Where an instance's pages are: the dashboard's own path for the default instance, as before there were several. */
export const instanceBase = (path: string, instance: string): string =>
  instance === DEFAULT_INSTANCE ? path : `${path}/${INSTANCES_SEGMENT}/${encodeURIComponent(instance)}`;
