import type { INestApplicationContext } from '@nestjs/common';
import { StampededDatabase, WorkerOrchestrator, toJob, type DrainOptions, type DrainResult, type Job } from '@stampeded/nestjs';

/**
 * Runs every due job of the app (or of one queue) to its outcome, one at a
 * time, and returns what happened: Oban's drain_queue for Stampeded. Works
 * with the background worker off (`worker: { enabled: false }`), which makes
 * tests deterministic.
 */
export function drain(app: INestApplicationContext, options: DrainOptions = {}): Promise<DrainResult> {
  return app.get(WorkerOrchestrator, { strict: false }).drain(options);
}

export interface ExpectEnqueuedOptions {
  task?: string;
  queue?: string;
  /** The job's args must contain these (a jsonb @> match). */
  args?: Record<string, unknown>;
  /** Only jobs in these states. Default: available, retryable (pending). */
  states?: string[];
  /** Exactly this many. Default: at least one. */
  count?: number;
}

/**
 * Asserts that matching jobs are enqueued and returns them; throws an error
 * listing what is enqueued instead when they are not. Oban's assert_enqueued.
 */
export async function expectEnqueued(app: INestApplicationContext, options: ExpectEnqueuedOptions): Promise<Job[]> {
  const db = app.get(StampededDatabase, { strict: false });
  const states = options.states ?? ['available', 'retryable'];
  const schema = db.quotedSchema();
  const rows = await db.raw(
    `SELECT id, queue, task, args, state FROM ${schema}.stampeded_jobs
      WHERE state = ANY($1) AND ($2::text IS NULL OR task = $2) AND ($3::text IS NULL OR queue = $3)
        AND ($4::jsonb IS NULL OR args @> $4::jsonb)
      ORDER BY id`,
    [states, options.task ?? null, options.queue ?? null, options.args ? JSON.stringify(options.args) : null],
  );
  const ok = options.count === undefined ? rows.length > 0 : rows.length === options.count;
  if (!ok) {
    const present = await db.raw(
      `SELECT queue, task, state, args FROM ${schema}.stampeded_jobs WHERE state = ANY($1) ORDER BY id LIMIT 20`,
      [states],
    );
    throw new Error(
      `Expected ${options.count ?? 'at least one'} job(s) matching ${JSON.stringify({ ...options, states })}, found ${rows.length}. ` +
        `Enqueued (${states.join('/')}): ${present.length ? present.map((r) => `${r.queue}/${r.task} ${JSON.stringify(r.args)}`).join('; ') : 'none'}.`,
    );
  }
  const ids = rows.map((r) => r.id);
  const full = await db.raw(`SELECT * FROM ${schema}.stampeded_jobs WHERE id = ANY($1::uuid[]) ORDER BY id`, [ids]);
  return full.map(toJob);
}
