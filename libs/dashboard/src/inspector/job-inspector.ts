import { JOB_LOG_LINES, JOB_STATES, toJobLogs, type JobLogRow, type JobState } from '@stampeded/nestjs/internal';
import { ERRORS_BY_FINGERPRINT, GET_JOB } from '../sql/jobs.sql.js';
import { MAX_SCAN, listJobsQuery, type JobFilters } from '../sql/job-list.sql.js';
import { searchFilters, type JobSearch } from './job-search.js';
import { BAD_FILTER, BAD_SCAN } from '../dashboard.messages.js';
import type { InspectorDatabase } from './inspector-database.js';
import { InspectorInputError, assertJobId } from './inspector-input.js';
import { decodeCursor, encodeCursor } from './job-cursor.js';

/** The jobs list's filters, searches and page, as the dashboard's query string and the CLI's options give them. */
export interface JobListOptions extends JobSearch {
  queue?: string;
  state?: string;
  task?: string;
  tenant?: string;
  destination?: string;
  /** A cursor from a previous page's `next`. */
  after?: string;
  limit?: number;
  scan?: number | string;
}

/** The jobs list's filters, as a query string names them: the one list that the page and the JSON API both read. */
const JOB_LIST_FILTERS = ['queue', 'state', 'task', 'tenant', 'destination', 'id', 'fingerprint', 'args', 'meta', 'after', 'scan'] as const;
export type JobListQuery = { [K in (typeof JOB_LIST_FILTERS)[number]]?: string };

/** The jobs list's filters read from a query string. */
export function jobListQuery(q: Record<string, string | undefined>): JobListQuery {
  return Object.fromEntries(JOB_LIST_FILTERS.map((name) => [name, q[name]])) as JobListQuery;
}

export interface JobPage {
  jobs: Record<string, unknown>[];
  /** Pass as `after` for the next page; null on the last page. */
  next: string | null;
  /**
   * Present when no index serves the filters (a task, alone or with a state
   * no index holds): the page read at most `budget` jobs in list order from
   * its cursor and kept those that matched. `ranOut` when the budget was
   * spent before a page more matched: `jobs` may then be short or empty
   * with more to find, and `next` resumes where the scan stopped, not after
   * the last match.
   */
  scan?: { budget: number; ranOut: boolean };
}

const MAX_PAGE = 500;

/** The jobs: a page of the list, one job in full, and the failing ones grouped by error. */
export class JobInspector {
  constructor(private readonly db: InspectorDatabase) {}

  async jobs(filters: JobListOptions = {}): Promise<JobPage> {
    const limit = Math.min(Math.max(1, Math.floor(filters.limit ?? 50)), MAX_PAGE);
    assertState(filters.state);
    const budget = scanBudget(filters.scan);
    const query: JobFilters = searchFilters(filters);
    for (const key of ['queue', 'state', 'task', 'tenant', 'destination'] as const) {
      if (filters[key] !== undefined && filters[key] !== '') query[key] = filters[key];
    }
    if (filters.after) query.after = decodeCursor(filters.after);
    const { statement, values, scan } = listJobsQuery(query, limit + 1, budget);
    const rows = await this.db.query(statement, values);
    if (scan === null) {
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      // A listing in fingerprint order hands on the last job's fingerprint with it.
      const next = rows.length > limit && last ? encodeCursor(last.queue, last.id, last.fingerprint_order ?? undefined) : null;
      return { jobs: page.map(({ fingerprint_order: _f, ...job }) => job), next };
    }
    // A bounded scan's rows: its matches in list order, and, last, the scan's
    // own last row when the budget was spent before the LIMIT was reached.
    const end = rows.find((r) => r.scan_end);
    const matches = rows.filter((r) => r.matched).map(({ matched: _m, scan_end: _e, ...job }) => job);
    const page = matches.slice(0, limit);
    const last = page[page.length - 1];
    if (matches.length > limit && last) return { jobs: page, next: encodeCursor(last.queue, last.id), scan: { budget: scan, ranOut: false } };
    return { jobs: page, next: end ? encodeCursor(end.queue, end.id) : null, scan: { budget: scan, ranOut: end !== undefined } };
  }

  /** One job's row, with `logs`: the lines its handler wrote with ctx.log(), and how many older ones were dropped. */
  async job(id: string, queue?: string): Promise<Record<string, unknown> | null> {
    assertJobId(id);
    const [[row], lines] = await Promise.all([this.db.query(GET_JOB, [id, queue ?? null]), this.db.query<JobLogRow>(JOB_LOG_LINES, [id])]);
    return row ? { ...row, logs: toJobLogs(lines) } : null;
  }

  async errors(options: { queue?: string; limit?: number } = {}): Promise<Record<string, unknown>[]> {
    const rows = await this.db.query(ERRORS_BY_FINGERPRINT, [options.queue ?? null, Math.min(options.limit ?? 50, MAX_PAGE)]);
    return rows.map((r) => ({ ...r, jobs: Number(r.jobs), retrying: Number(r.retrying), discarded: Number(r.discarded) }));
  }
}

/**
 * A state filter names one of the core's states (JOB_STATES), or is absent.
 * Empty is absent, as for every other filter: the jobs page's form sends its
 * "any state" choice as state=.
 */
export function assertState(state: string | undefined): void {
  if (state && !JOB_STATES.includes(state as JobState)) throw new InspectorInputError(BAD_FILTER('state', state, JOB_STATES));
}

/** A bounded scan's budget: absent for the default, else a whole number of jobs no larger than MAX_SCAN. */
function scanBudget(value: number | string | undefined): number | undefined {
  if (value === undefined || value === '') return undefined;
  const n = typeof value === 'number' ? value : /^\s*\d+\s*$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < 1 || n > MAX_SCAN) throw new InspectorInputError(BAD_SCAN(String(value), MAX_SCAN));
  return n;
}
