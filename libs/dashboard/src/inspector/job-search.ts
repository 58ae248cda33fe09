import { BAD_FINGERPRINT_FILTER, BAD_ID_FILTER, BAD_JSON_FILTER } from '../dashboard.messages.js';
import type { JobFilters } from '../sql/job-list.sql.js';
import { InspectorInputError, isUuid } from './inspector-input.js';

/** The searches beside the plain filters, as the jobs page's form, the API's query string and the CLI's options give them. */
export interface JobSearch {
  /** A job's id, or its last characters as the list shows them (4 hex digits or more). */
  id?: string;
  /** An error fingerprint, or its first 8 hex digits or more (the errors page shows 12). */
  fingerprint?: string;
  /** A JSON object the job's args contain: {"orderId": 42}. */
  args?: string;
  /** A JSON object the job's meta contains. */
  meta?: string;
}

const TAIL = /^[0-9a-f-]{4,36}$/;
const FINGERPRINT = /^[0-9a-f]{8,64}$/;

/** The searches, checked and normalised for the list's statement; an InspectorInputError saying what to type for a bad one. */
export function searchFilters(search: JobSearch): Pick<JobFilters, 'id' | 'idTail' | 'fingerprint' | 'args' | 'meta'> {
  const filters: Pick<JobFilters, 'id' | 'idTail' | 'fingerprint' | 'args' | 'meta'> = {};
  const id = search.id?.trim().toLowerCase().replace(/^…/, '');
  if (id) {
    if (isUuid(id)) filters.id = id;
    else if (TAIL.test(id)) filters.idTail = id;
    else throw new InspectorInputError(BAD_ID_FILTER(search.id!));
  }
  const fingerprint = search.fingerprint?.trim().toLowerCase();
  if (fingerprint) {
    if (!FINGERPRINT.test(fingerprint)) throw new InspectorInputError(BAD_FINGERPRINT_FILTER(search.fingerprint!));
    filters.fingerprint = fingerprint;
  }
  for (const name of ['args', 'meta'] as const) {
    const text = search[name]?.trim();
    if (!text) continue;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      throw new InspectorInputError(BAD_JSON_FILTER(name, text));
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new InspectorInputError(BAD_JSON_FILTER(name, text));
    filters[name] = JSON.stringify(value);
  }
  return filters;
}
