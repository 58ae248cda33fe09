/** Injection token of the dashboard's resolved options. */
export const DASHBOARD_OPTIONS = Symbol('STAMPEDED_DASHBOARD_OPTIONS');

/** Double-submit CSRF: a random token in an HttpOnly cookie, echoed in a header or form field. */
export const CSRF_COOKIE = 'stampeded_csrf';
export const CSRF_HEADER = 'x-stampeded-csrf';
export const CSRF_FIELD = '_csrf';

export const DEFAULT_PATH = '/stampeded';
