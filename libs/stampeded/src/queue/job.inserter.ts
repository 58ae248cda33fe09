import type { QueryResultRow } from 'pg';
import type { EntityManager } from 'typeorm';
import type { StampededDatabase } from '../database/stampeded-database.js';
import type { JobTracer } from '../tracing/job-tracer.js';
import { InvalidJobError } from '../errors/stampeded.errors.js';
import { DEDUP_TWIN_UNSETTLED, JSONB_OVER_LIMIT } from '../stampeded.messages.js';
import { LIMITS } from '../stampeded.constants.js';
import { ENQUEUE, ENQUEUE_KEYED, ENQUEUE_ONE, ENQUEUE_PLAIN, ENQUEUE_PLAIN_KEYED } from '../sql/enqueue.sql.js';
import type { Statement } from '../sql/statement.js';
import type { EnqueueResult } from '../interfaces/job-options.interface.js';
import type { JobRow } from './job-input.validator.js';
import { rowsToJson, rowToParameters } from './job-row.serializer.js';
import { UuidV7Source } from './uuidv7.js';

/** A duplicate racing a concurrent insert of its twin is asked again, this many times. */
const DEDUP_RACE_RETRIES = 5;

type InsertAnswer = { ord: number; id: string | null; deduplicated: boolean };

/**
 * Inserts validated rows: chooses the statement (one job, a plain batch, a
 * batch with ordering keys, a batch with dedup scopes), draws the ids, and
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
    let pending = rows.map((row, index) => ({ row, index }));
    for (let round = 0; pending.length && round <= DEDUP_RACE_RETRIES; round++) {
      // Ids drawn here as for the plain enqueue: a job inserted takes its row's, a duplicate its twin's.
      const answer = await run(
        keyed ? ENQUEUE_KEYED : ENQUEUE,
        rowsToJson(
          pending.map((p) => p.row),
          this.ids.many(pending.length),
        ),
      );
      const unresolved: typeof pending = [];
      for (const { ord, id, deduplicated } of answer) {
        const item = pending[ord - 1];
        if (id === null) unresolved.push(item);
        else results[item.index] = { id, deduplicated };
      }
      pending = unresolved;
    }
    if (pending.length) throw new Error(DEDUP_TWIN_UNSETTLED(pending.length));
    return results;
  }
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
