import type { QueryResultRow } from 'pg';
import type { RedriveOptions, RedriveResult } from '@stampeded/nestjs';
import type { CancelWorkflowResult, Workflow, WorkflowSummary } from '@stampeded/nestjs';
import {
  CANCEL_WORKFLOW,
  DeadLetterRedriver,
  FINISHED_STATES,
  JOB_STATES,
  GET_WORKFLOW,
  LIST_WORKFLOWS,
  PAUSE_QUEUE,
  pauseExplained,
  RESUME_QUEUE,
  SET_SCHEDULE_PAUSED,
  StampededConfigError,
  toWorkflow,
  toWorkflowSummary,
  TRIGGER_SCHEDULE,
  WORKFLOW_JOBS,
  type JobState,
  type Statement,
} from '@stampeded/nestjs/internal';
import {
  BULK_CANCEL,
  BULK_COUNT,
  BULK_DISCARD,
  BULK_RETRY,
  CANCEL_JOB,
  DISCARD_JOB,
  ERRORS_BY_FINGERPRINT,
  GET_JOB,
  MAX_SCAN,
  RETRY_JOB,
  THROUGHPUT,
  listJobsQuery,
  type JobFilters,
} from '../sql/jobs.sql.js';
import { QUEUE_COUNTS, QUEUE_STATE } from '../sql/queues.sql.js';
import { RUNNING_JOBS, WORKERS } from '../sql/workers.sql.js';
import { SCHEDULES } from '../sql/schedules.sql.js';
import { INDEX_DENSITY, MAINTENANCE_LEADER, PARTITION_HEALTH, SCHEMA_VERSIONS, SERVER_VERSION, VACUUM_HEALTH } from '../sql/health.sql.js';
import { PRUNE_BATCH, PRUNE_OCCURRENCES } from '../sql/maintenance.sql.js';
import {
  BAD_BULK_ACTION,
  BAD_BULK_NUMBER,
  BAD_CURSOR,
  BAD_FILTER,
  BAD_SCAN,
  BAD_WORKFLOW_LIMIT,
  NOT_A_JOB_ID,
  NOT_A_WORKFLOW_ID,
} from '../dashboard.messages.js';

/** What the inspector needs of a database: StampededDatabase fits. */
export interface InspectorDatabase {
  query<Row extends QueryResultRow = QueryResultRow>(statement: Statement, values?: unknown[]): Promise<Row[]>;
  /** The schema Stampeded is installed in. */
  readonly schema: string;
}

/** An input the operator got wrong: a 400 in the API, exit code 2 in the CLI. */
export class InspectorInputError extends Error {
  override name = 'InspectorInputError';
}

export interface QueueSummary {
  queue: string;
  counts: Record<JobState, number>;
  verdict: string;
  reason: string | null;
  decidedAt: Date | null;
  maxRunning: number | null;
  maxWaitSecs: number | null;
  /** An operator's pause: no worker claims from the queue until it is resumed. */
  paused: boolean;
  pausedBy: string | null;
  pauseReason: string | null;
  pausedAt: Date | null;
  /** How long the job at the head of the claim order has been due, in seconds; null when none is due. */
  headWaitSecs: number | null;
}

export interface ThroughputBucket {
  /** Start of the minute, epoch seconds. */
  at: number;
  /** Jobs that finished (completed, discarded or cancelled) in that minute, all queues. */
  finished: number;
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

export interface ActionResult {
  id: string;
  queue: string | null;
  previousState: string;
  state: string;
  changed: boolean;
}

export const BULK_ACTIONS = ['retry', 'cancel', 'discard'] as const;
export type BulkAction = (typeof BULK_ACTIONS)[number];

/**
 * The states in which each action on a job changes it, as the core's
 * functions decide (stampeded_retry, stampeded_cancel, stampeded_discard):
 * the job page offers an action only there, and a bulk action acts only on
 * them. Retry is split in two: a finished job runs again with a fresh
 * budget, a waiting one runs now. None is a state its action leaves a job
 * in, so a bulk action acts on a job once and its batch loop ends.
 */
export const ACTION_STATES: Record<BulkAction | 'run', readonly JobState[]> = {
  retry: ['discarded', 'cancelled'],
  run: ['available', 'retryable'],
  cancel: JOB_STATES.filter((s) => !FINISHED_STATES.has(s)),
  discard: ['available', 'retryable'],
};

/** The jobs list's filters, as a bulk action takes them. */
export interface BulkFilters {
  queue?: string;
  state?: string;
  task?: string;
  tenant?: string;
  destination?: string;
}

export interface BulkResult {
  action: BulkAction;
  /** With dryRun: how many jobs the action would change now (up to limit). */
  matched?: number;
  /** How many jobs it changed. */
  changed: number;
  /** The statements it took, each changing at most batchSize jobs. */
  batches: number;
  /** True when it stopped at limit: more jobs may match; run it again for them. */
  truncated: boolean;
}

/** QueueService.redrive()'s options and answer: the inspector redrives with the same code. */
export type { RedriveOptions, RedriveResult };

export interface PruneOptions {
  completedOlderThan?: string;
  failedOlderThan?: string;
  occurrencesOlderThan?: string;
  batchSize?: number;
  onProgress?: (deleted: number) => void;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAX_PAGE = 500;

/**
 * The operator's view of one Stampeded install, and the few actions on it.
 * The dashboard and the CLI both use it, so both answer the same way. Every
 * statement reads through an index or the trigger-maintained counters.
 */
export class StampededInspector {
  constructor(private readonly db: InspectorDatabase) {}

  async queues(): Promise<QueueSummary[]> {
    const [counts, states] = await Promise.all([
      this.db.query<{ queue: string; state: JobState; n: string }>(QUEUE_COUNTS),
      this.db.query<Record<string, any>>(QUEUE_STATE),
    ]);
    const byQueue = new Map<string, QueueSummary>();
    const summary = (queue: string) => {
      let s = byQueue.get(queue);
      if (!s) {
        s = {
          queue,
          counts: emptyCounts(),
          verdict: 'steady',
          reason: null,
          decidedAt: null,
          maxRunning: null,
          maxWaitSecs: null,
          paused: false,
          pausedBy: null,
          pauseReason: null,
          pausedAt: null,
          headWaitSecs: null,
        };
        byQueue.set(queue, s);
      }
      return s;
    };
    for (const row of states) {
      const s = summary(row.queue);
      s.verdict = row.verdict ?? 'steady';
      s.reason = row.reason;
      s.decidedAt = row.decided_at;
      s.maxRunning = row.max_running;
      s.maxWaitSecs = row.max_wait_secs;
      s.paused = row.paused === true;
      s.pausedBy = row.paused_by;
      s.pauseReason = row.pause_reason;
      s.pausedAt = row.paused_at;
      s.headWaitSecs = row.head_wait_secs === null ? null : Math.max(0, Number(row.head_wait_secs));
    }
    for (const row of counts) if (Number(row.n) !== 0 || byQueue.has(row.queue)) summary(row.queue).counts[row.state] = Number(row.n);
    return [...byQueue.values()].sort((a, b) => a.queue.localeCompare(b.queue));
  }

  /** Jobs finished per minute over the last `minutes`, oldest first, every minute present. */
  async throughput(options: { minutes?: number } = {}): Promise<ThroughputBucket[]> {
    const minutes = options.minutes ?? 60;
    const rows = await this.db.query<{ bucket: string; n: string }>(THROUGHPUT, [minutes]);
    const now = Math.floor(Date.now() / 60_000) * 60;
    const buckets = new Map<number, ThroughputBucket>();
    for (let i = minutes - 1; i >= 0; i--) buckets.set(now - i * 60, { at: now - i * 60, finished: 0 });
    // The database's clock decides the buckets; one a little off ours still shows.
    for (const row of rows) buckets.set(Number(row.bucket), { at: Number(row.bucket), finished: Number(row.n) });
    return [...buckets.values()].sort((a, b) => a.at - b.at).slice(-minutes);
  }

  async jobs(
    filters: {
      queue?: string;
      state?: string;
      task?: string;
      tenant?: string;
      destination?: string;
      after?: string;
      limit?: number;
      scan?: number | string;
    } = {},
  ): Promise<JobPage> {
    const limit = Math.min(Math.max(1, Math.floor(filters.limit ?? 50)), MAX_PAGE);
    if (filters.state !== undefined && !JOB_STATES.includes(filters.state as JobState)) {
      throw new InspectorInputError(BAD_FILTER('state', filters.state, JOB_STATES));
    }
    const budget = scanBudget(filters.scan);
    const query: JobFilters = {};
    for (const key of ['queue', 'state', 'task', 'tenant', 'destination'] as const) {
      if (filters[key] !== undefined && filters[key] !== '') query[key] = filters[key];
    }
    if (filters.after) query.after = decodeCursor(filters.after);
    const { statement, values, scan } = listJobsQuery(query, limit + 1, budget);
    const rows = await this.db.query(statement, values);
    if (scan === null) {
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      return { jobs: page, next: rows.length > limit && last ? encodeCursor(last.queue, last.id) : null };
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

  async job(id: string, queue?: string): Promise<Record<string, unknown> | null> {
    assertJobId(id);
    const [row] = await this.db.query(GET_JOB, [id, queue ?? null]);
    return row ?? null;
  }

  /** A discarded or cancelled job runs again with a fresh budget; a waiting one runs now. */
  retry(id: string, queue?: string): Promise<ActionResult | null> {
    return this.act(RETRY_JOB, id, queue, []);
  }

  /** Fenced: once this returns no worker can record an outcome for the job. */
  cancel(id: string, queue?: string): Promise<ActionResult | null> {
    return this.act(CANCEL_JOB, id, queue, []);
  }

  /** A waiting job is finished as discarded without running again; another is left as it is, and says its state. */
  discard(id: string, queue?: string, by = 'an operator'): Promise<ActionResult | null> {
    return this.act(DISCARD_JOB, id, queue, [`discarded by ${by}`]);
  }

  async errors(options: { queue?: string; limit?: number } = {}): Promise<Record<string, unknown>[]> {
    const rows = await this.db.query(ERRORS_BY_FINGERPRINT, [options.queue ?? null, Math.min(options.limit ?? 50, MAX_PAGE)]);
    return rows.map((r) => ({ ...r, jobs: Number(r.jobs), retrying: Number(r.retrying), discarded: Number(r.discarded) }));
  }

  async workers(): Promise<{ workers: Record<string, unknown>[]; running: Record<string, unknown>[] }> {
    const [workers, running] = await Promise.all([this.db.query(WORKERS), this.db.query(RUNNING_JOBS, [200])]);
    return { workers, running };
  }

  schedules(): Promise<Record<string, unknown>[]> {
    return this.db.query(SCHEDULES);
  }

  /** Workflows and batches, newest first, with their jobs counted by state: the core's own statement, as QueueService.workflows() reads it. */
  async workflows(options: { limit?: number | string; name?: string } = {}): Promise<WorkflowSummary[]> {
    const limit = options.limit === undefined || options.limit === '' ? 50 : Number(options.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new InspectorInputError(BAD_WORKFLOW_LIMIT(options.limit));
    const rows = await this.db.query(LIST_WORKFLOWS, [limit, null, options.name || null]);
    return rows.map(toWorkflowSummary);
  }

  /** One workflow with each job's state and what it waits for, or null. */
  async workflow(id: string): Promise<Workflow | null> {
    assertWorkflowId(id);
    const [row] = await this.db.query(GET_WORKFLOW, [id]);
    if (!row) return null;
    return toWorkflow(row, await this.db.query(WORKFLOW_JOBS, [id]));
  }

  /** Cancels every unfinished job of a workflow, as QueueService.cancelWorkflow() does; null when there is no such workflow. */
  async cancelWorkflow(id: string, reason?: string): Promise<CancelWorkflowResult | null> {
    assertWorkflowId(id);
    const [found] = await this.db.query(GET_WORKFLOW, [id]);
    if (!found) return null;
    const [row] = await this.db.query<{ cancelled: number }>(CANCEL_WORKFLOW, [id, reason || null]);
    return { id, cancelled: row.cancelled };
  }

  /** True when the schedule exists. The core's statement, as SchedulesService.pause() and resume() run it. */
  async setSchedulePaused(key: string, paused: boolean): Promise<boolean> {
    return (await this.db.query(SET_SCHEDULE_PAUSED, [key, paused])).length > 0;
  }

  /**
   * Enqueues a schedule's job once, now, leaving its regular runs as they
   * were: the core's own statement, as SchedulesService.trigger() runs it.
   * Null when there is no such schedule.
   */
  async triggerSchedule(key: string): Promise<{ id: string; queue: string } | null> {
    const [row] = await this.db.query<{ job_id: string; queue: string }>(TRIGGER_SCHEDULE, [key]);
    return row ? { id: row.job_id, queue: row.queue } : null;
  }

  /**
   * An operator's pause, for the whole fleet until resumed: the core's own
   * statement, so the dashboard, the CLI and QueueControlService.pause()
   * write one thing.
   */
  async pauseQueue(queue: string, by: string, why?: string): Promise<Record<string, unknown>> {
    const [row] = await this.db.query(PAUSE_QUEUE, [queue, by, why || null, pauseExplained(by, why)]);
    return row;
  }

  async resumeQueue(queue: string, by: string): Promise<Record<string, unknown>> {
    const [row] = await this.db.query(RESUME_QUEUE, [queue, by]);
    return row;
  }

  async health(): Promise<{
    server: { version: string; num: number };
    migrations: { version: number; name: string; applied_at: Date }[];
    vacuum: Record<string, unknown>[];
    indexes: Record<string, unknown>[];
    partitions: Record<string, unknown>[];
    /** Whether a process holds this schema's maintenance leader lock now. */
    maintenanceLeader: boolean;
  }> {
    const [[server], migrations, vacuum, indexes, partitions, [leader]] = await Promise.all([
      this.db.query<{ version: string; num: number }>(SERVER_VERSION),
      this.db.query<{ version: number; name: string; applied_at: Date }>(SCHEMA_VERSIONS),
      this.db.query(VACUUM_HEALTH),
      this.db.query(INDEX_DENSITY),
      this.db.query(PARTITION_HEALTH),
      this.db.query<{ present: boolean }>(MAINTENANCE_LEADER, [this.db.schema]),
    ]);
    return { server, migrations, vacuum, indexes, partitions, maintenanceLeader: leader.present };
  }

  /**
   * Puts a dead-letter queue's copies back on their source queues, in
   * batches, optionally only those of one task or one error fingerprint:
   * @stampeded/nestjs's DeadLetterRedriver, the code behind
   * QueueService.redrive(), so the dashboard, the CLI and the app move
   * copies alike. Its refusals of bad input are the operator's to fix: a 400
   * in the API, exit code 2 in the CLI.
   */
  async redrive(queue: string, options: RedriveOptions = {}): Promise<RedriveResult> {
    try {
      return await new DeadLetterRedriver(this.db).redrive(queue, options, { where: 'redrive' });
    } catch (err) {
      if (err instanceof StampededConfigError) throw new InspectorInputError(err.message);
      throw err;
    }
  }

  /** Deletes finished jobs past their retention, batch by batch until a short batch comes back. */
  async prune(options: PruneOptions = {}): Promise<{ jobs: number; occurrences: number }> {
    const batchSize = options.batchSize ?? 10_000;
    let jobs = 0;
    for (;;) {
      const [{ deleted }] = await this.db.query<{ deleted: number }>(PRUNE_BATCH, [
        options.completedOlderThan ?? '1 hour',
        batchSize,
        options.failedOlderThan ?? '7 days',
      ]);
      jobs += deleted;
      if (deleted) options.onProgress?.(jobs);
      if (deleted < batchSize) break;
    }
    let occurrences = 0;
    for (;;) {
      const [{ deleted }] = await this.db.query<{ deleted: number }>(PRUNE_OCCURRENCES, [options.occurrencesOlderThan ?? '30 days']);
      occurrences += deleted;
      // stampeded_prune_occurrences deletes at most 10000 a call.
      if (deleted < 10_000) break;
    }
    return { jobs, occurrences };
  }

  /**
   * Retries, cancels or discards every job matching the filters that the
   * action applies to, in batches of batchSize (one statement each, in id
   * order), up to limit jobs. dryRun counts them instead.
   */
  async bulk(action: string, filters: BulkFilters, options: { dryRun?: boolean; batchSize?: number; limit?: number; by?: string } = {}): Promise<BulkResult> {
    if (!BULK_ACTIONS.includes(action as BulkAction)) throw new InspectorInputError(BAD_BULK_ACTION(action, BULK_ACTIONS));
    if (filters.state && !JOB_STATES.includes(filters.state as JobState)) throw new InspectorInputError(BAD_FILTER('state', filters.state, JOB_STATES));
    const eligible = ACTION_STATES[action as BulkAction].filter((s) => !filters.state || s === filters.state);
    const whole = (name: string, value: number | undefined, fallback: number, max: number) => {
      if (value === undefined) return fallback;
      if (!Number.isInteger(value) || value < 1 || value > max) throw new InspectorInputError(BAD_BULK_NUMBER(name, value, max));
      return value;
    };
    const batchSize = whole('batchSize', options.batchSize, 500, 5_000);
    const limit = whole('limit', options.limit, 100_000, 10_000_000);
    const params = (after: string | null, size: number) => [
      eligible,
      filters.queue || null,
      filters.task || null,
      filters.tenant || null,
      filters.destination || null,
      after,
      size,
    ];
    const result: BulkResult = { action: action as BulkAction, changed: 0, batches: 0, truncated: false };
    if (options.dryRun) {
      const [{ matched }] = await this.db.query<{ matched: number }>(BULK_COUNT, params(null, limit + 1));
      return { ...result, matched: Math.min(matched, limit), truncated: matched > limit };
    }
    const statement = action === 'retry' ? BULK_RETRY : action === 'cancel' ? BULK_CANCEL : BULK_DISCARD;
    const extra = action === 'discard' ? [`discarded by ${options.by ?? 'an operator'}`] : [];
    let after: string | null = null;
    while (eligible.length && result.changed < limit) {
      const size = Math.min(batchSize, limit - result.changed);
      const rows: { id: string; was: string; now_state: string }[] = await this.db.query(statement, [...params(after, size), ...extra]);
      result.batches += 1;
      result.changed += rows.filter((r) => r.was !== r.now_state).length;
      if (rows.length < size) return result;
      after = rows.reduce((max, r) => (r.id > max ? r.id : max), rows[0].id);
    }
    result.truncated = eligible.length > 0;
    return result;
  }

  private async act(statement: Statement, id: string, queue: string | undefined, extra: unknown[]): Promise<ActionResult | null> {
    assertJobId(id);
    const [row] = await this.db.query<{ was: string; now_state: string; queue: string }>(statement, [id, queue ?? null, ...extra]);
    if (!row) return null;
    return {
      id,
      queue: row.queue,
      previousState: row.was,
      state: row.now_state,
      changed: row.was !== row.now_state || (statement === RETRY_JOB && row.now_state === 'available'),
    };
  }
}

export function emptyCounts(): Record<JobState, number> {
  return Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobState, number>;
}

function assertWorkflowId(id: string): void {
  if (typeof id !== 'string' || !UUID.test(id)) throw new InspectorInputError(NOT_A_WORKFLOW_ID(id));
}

function assertJobId(id: string): void {
  if (typeof id !== 'string' || !UUID.test(id)) throw new InspectorInputError(NOT_A_JOB_ID(id));
}

/** A bounded scan's budget: absent for the default, else a whole number of jobs no larger than MAX_SCAN. */
function scanBudget(value: number | string | undefined): number | undefined {
  if (value === undefined || value === '') return undefined;
  const n = typeof value === 'number' ? value : /^\s*\d+\s*$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < 1 || n > MAX_SCAN) throw new InspectorInputError(BAD_SCAN(String(value), MAX_SCAN));
  return n;
}

/** A page's cursor: the last job it showed, as opaque text for a URL. */
export function encodeCursor(queue: string, id: string): string {
  return Buffer.from(JSON.stringify([queue, id])).toString('base64url');
}

/** The job a cursor names, or the one error for every cursor this dashboard did not write. */
export function decodeCursor(cursor: string): { queue: string; id: string } {
  try {
    const [queue, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (typeof queue === 'string' && typeof id === 'string' && UUID.test(id)) return { queue, id };
  } catch {
    // fall through to the one error below
  }
  throw new InspectorInputError(BAD_CURSOR());
}
