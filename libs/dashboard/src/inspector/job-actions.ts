import { FINISHED_STATES, JOB_STATES, type JobState, type Statement } from '@stampeded/nestjs/internal';
import { BULK_CANCEL, BULK_COUNT, BULK_DISCARD, BULK_RETRY, CANCEL_JOB, DISCARD_JOB, RETRY_JOB } from '../sql/jobs.sql.js';
import { BAD_BULK_ACTION, BAD_BULK_NUMBER } from '../dashboard.messages.js';
import type { InspectorDatabase } from './inspector-database.js';
import { InspectorInputError, assertJobId } from './inspector-input.js';
import { assertState } from './job-inspector.js';

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

/** An operator's retry, cancel and discard, of one job or of every job a filter matches, through the core's functions. */
export class JobActions {
  constructor(private readonly db: InspectorDatabase) {}

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

  /**
   * Retries, cancels or discards every job matching the filters that the
   * action applies to, in batches of batchSize (one statement each, in id
   * order), up to limit jobs. dryRun counts them instead.
   */
  async bulk(action: string, filters: BulkFilters, options: { dryRun?: boolean; batchSize?: number; limit?: number; by?: string } = {}): Promise<BulkResult> {
    if (!BULK_ACTIONS.includes(action as BulkAction)) throw new InspectorInputError(BAD_BULK_ACTION(action, BULK_ACTIONS));
    assertState(filters.state);
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
