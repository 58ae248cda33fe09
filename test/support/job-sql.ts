import type pg from 'pg';

/** A job as a claim answers it: what a completion needs to name it. */
export interface ClaimedRow {
  id: string;
  queue: string;
  attempt: number;
}

/**
 * The worker's own statements, run by hand on a client: a worker row, the
 * claim (stampeded_claim_batch) and the batched completion
 * (stampeded_complete_many, with results when given), for tests of what the
 * functions guarantee.
 */
export function jobSql(client: () => pg.Client) {
  return {
    worker: async (): Promise<string> =>
      (await client().query(`INSERT INTO stampeded_workers (hostname, pid) VALUES ('test', 1) RETURNING id::text`)).rows[0].id,
    claim: async (queue: string, workerId: string, limit: number, on: pg.Client = client()): Promise<ClaimedRow[]> =>
      (await on.query(`SELECT id::text, queue, attempt FROM stampeded_claim_batch($1, $2, $3)`, [queue, workerId, limit])).rows,
    /** `results`: each job's result as JSON text (null for none), as the worker sends them; none at all by default. */
    completeMany: async (workerId: string, jobs: ClaimedRow[], on: pg.Client = client(), results: (string | null)[] | null = null): Promise<string[]> =>
      (
        await on.query(`SELECT id::text FROM stampeded_complete_many($1, $2::text[], $3::uuid[], $4::smallint[], $5::jsonb[])`, [
          workerId,
          jobs.map((j) => j.queue),
          jobs.map((j) => j.id),
          jobs.map((j) => j.attempt),
          results,
        ])
      ).rows.map((r) => r.id as string),
  };
}
