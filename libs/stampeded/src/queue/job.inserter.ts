import type { QueryResultRow } from 'pg';
import type { EntityManager } from 'typeorm';
import type { StampededDatabase } from '../database/stampeded-database.js';
import type { JobTracer } from '../tracing/job-tracer.js';
import { InvalidJobError } from '../errors/stampeded.errors.js';
import { DEDUP_TWIN_UNSETTLED, JSONB_OVER_LIMIT } from '../stampeded.messages.js';
import { LIMITS } from '../stampeded.constants.js';
import { ENQUEUE, ENQUEUE_DEBOUNCE, ENQUEUE_KEYED, ENQUEUE_ONE, ENQUEUE_PLAIN, ENQUEUE_PLAIN_KEYED } from '../sql/enqueue.sql.js';
import type { Statement } from '../sql/statement.js';
import type { EnqueueResult } from '../interfaces/job-options.interface.js';
import type { JobRow } from './job-input.validator.js';
import { rowsToJson, rowToParameters } from './job-row.serializer.js';
import { UuidV7Source } from './uuidv7.js';

/** A duplicate racing a concurrent insert of its twin is asked again, this many times. */
const DEDUP_RACE_RETRIES = 5;

type InsertAnswer = { ord: number; id: string | null; deduplicated: boolean; replaced?: boolean; runs_after?: string | null };

/**
 * Inserts validated rows: chooses the statement (one job, a plain batch, a
 * batch with ordering keys, a batch with dedup scopes, the debounced rows of
 * a batch, after its others), draws the ids, and
 * asks again for the duplicates whose twin changed state under them. With a
 * `manager`, on the caller's transaction.
 */
export class JobInserter {
  /** Job and workflow ids, drawn here rather than by the database (see UuidV7Source). */
  readonly ids = new UuidV7Source();

  constructor(
    private readonly db: StampededDatabase,
    private readonly tracer: JobTracer | null,
  ) {}

  /** Prepares the plain enqueues on two connections, so that the first enqueues do not pay for it; `row` is never seen. */
  warm(row: JobRow): Promise<void> {
    return this.db.warm([
      { statement: ENQUEUE_PLAIN, values: ['[]', '{}'] },
      { statement: ENQUEUE_ONE, values: rowToParameters(row, this.ids.many(1)[0]) },
    ]);
  }

  /** Inserts, in a producer span when tracing is on: one span per enqueue() or enqueueMany() call. */
  insert(rows: JobRow[], batch: boolean, manager?: EntityManager): Promise<EnqueueResult[]> {
    if (!this.tracer) return this.insertRows(rows, manager);
    return this.tracer.enqueue(rows, batch, (traced) => this.insertRows(traced, manager));
  }

  /** Runs a statement on the caller's transaction when there is one, else on the pool. */
  async query<Row extends QueryResultRow = QueryResultRow>(statement: Statement, values: unknown[], manager?: EntityManager): Promise<Row[]> {
    if (!manager) return this.db.query<Row>(statement, values);
    return (await manager.query(this.db.statement(statement).text, values)) as Row[];
  }

  private async insertRows(rows: JobRow[], manager?: EntityManager): Promise<EnqueueResult[]> {
    const run = (statement: Statement, values: unknown[]) => this.query<InsertAnswer>(statement, values, manager).catch(explainJsonbLimit);
    // A batch with an ordering key reads its keys' order to choose each job's state (migration 14); one without reads none.
    const keyed = rows.some((row) => row.ordering_key !== null);
    if (!rows.some((row) => row.dedup_scope !== null)) {
      // Nothing can conflict: every row is inserted under the id drawn here, or none is.
      const ids = this.ids.many(rows.length);
      if (keyed) await run(ENQUEUE_PLAIN_KEYED, rowsToJson(rows, ids));
      else if (rows.length === 1) await run(ENQUEUE_ONE, rowToParameters(rows[0], ids[0]));
      else await run(ENQUEUE_PLAIN, rowsToJson(rows, ids));
      return ids.map((id) => ({ id, deduplicated: false }));
    }
    const results: EnqueueResult[] = new Array(rows.length);
    const items = rows.map((row, index) => ({ row, index }));
    const debounced = items.filter((item) => item.row.debounce);
    const kept = debounced.length ? items.filter((item) => !item.row.debounce) : items;
    if (kept.length) await this.deduplicate(kept, keyed ? ENQUEUE_KEYED : ENQUEUE, results, run);
    if (debounced.length) await this.deduplicate(debounced, ENQUEUE_DEBOUNCE, results, run);
    return results;
  }

  /**
   * Inserts rows with a dedup scope through `statement`, into `results` by
   * each row's index, asking again for the duplicates whose twin changed
   * state under them (the statement answers their id NULL).
   */
  private async deduplicate(
    items: { row: JobRow; index: number }[],
    statement: Statement,
    results: EnqueueResult[],
    run: (statement: Statement, values: unknown[]) => Promise<InsertAnswer[]>,
  ): Promise<void> {
    const debounce = statement === ENQUEUE_DEBOUNCE;
    let pending = items;
    for (let round = 0; pending.length && round <= DEDUP_RACE_RETRIES; round++) {
      const rows = pending.map((p) => p.row);
      // Ids drawn here as for the plain enqueue: a job inserted takes its row's, a duplicate its twin's.
      const answer = await run(statement, rowsToJson(rows, this.ids.many(pending.length), debounce ? rows.map(debounceMembers) : undefined));
      const unresolved: typeof pending = [];
      for (const { ord, id, deduplicated, replaced, runs_after } of answer) {
        const item = pending[ord - 1];
        if (id === null) unresolved.push(item);
        else if (!debounce || !deduplicated) results[item.index] = { id, deduplicated };
        else results[item.index] = { id, deduplicated, replaced: replaced === true, ...(runs_after && { runsAfter: runs_after }) };
      }
      pending = unresolved;
    }
    if (pending.length) throw new Error(DEDUP_TWIN_UNSETTLED(pending.length));
  }
}

/** A debounced row's members of ENQUEUE_DEBOUNCE's own columns (DEBOUNCE_INPUT_COLUMNS), as JSON. */
function debounceMembers(row: JobRow): string {
  const { mode, maxDelayMs } = row.debounce!;
  return `"dedup_mode":"${mode}","dedup_max_delay_ms":${maxDelayMs ?? 'null'}`;
}

/**
 * jsonb can be larger than the JSON text the validator measured (each
 * number is stored as a numeric with a header): args under the cap as text
 * can go over the schema's CHECK, a bare constraint error. Said as what it
 * is; any other error passes through.
 */
function explainJsonbLimit(err: unknown): never {
  const { code, constraint } = err as { code?: string; constraint?: string };
  if (code === '23514' && constraint === 'stampeded_jobs_args_check') throw new InvalidJobError(JSONB_OVER_LIMIT('args', LIMITS.argsBytes));
  if (code === '23514' && constraint === 'stampeded_jobs_meta_check') throw new InvalidJobError(JSONB_OVER_LIMIT('meta', LIMITS.metaBytes));
  throw err;
}
