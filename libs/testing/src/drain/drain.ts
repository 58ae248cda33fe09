import type { INestApplicationContext } from '@nestjs/common';
import type { Job, JobState, TaskClass } from '@stampeded/nestjs';
import { JOB_STATES, StampededDatabase, taskNameOf, toJob, WAITING_STATES } from '@stampeded/nestjs/internal';
import { WorkerOrchestrator, type DrainOptions, type DrainResult } from '@stampeded/nestjs/internal-runtime';
import { ENQUEUED_SAMPLE, MATCHING_JOBS } from '../sql/jobs.sql.js';
import { BAD_STATES, NOT_ENQUEUED } from '../testing.messages.js';

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
  /** The task, by name or by its @Task() class. */
  task?: string | TaskClass;
  queue?: string;
  /** The job's args must contain these (a jsonb @> match). */
  args?: Record<string, unknown>;
  /** Only jobs in these states. Default: every state of a job not yet taken by a worker (pending, available, retryable). */
  states?: readonly JobState[];
  /** Exactly this many. Default: at least one. */
  count?: number;
}

/**
 * Asserts that matching jobs are enqueued and returns them; throws an error
 * listing what is enqueued instead when they are not. Oban's assert_enqueued.
 */
export async function expectEnqueued(app: INestApplicationContext, options: ExpectEnqueuedOptions): Promise<Job[]> {
  const db = app.get(StampededDatabase, { strict: false });
  const states = options.states ?? [...WAITING_STATES];
  const unknown = states.find((s) => !JOB_STATES.includes(s));
  if (unknown !== undefined) throw new Error(BAD_STATES('expectEnqueued()', unknown, JOB_STATES));
  const task = options.task === undefined ? undefined : taskNameOf(options.task);
  const rows = await db.query(MATCHING_JOBS, [states, task ?? null, options.queue ?? null, options.args ? JSON.stringify(options.args) : null]);
  const ok = options.count === undefined ? rows.length > 0 : rows.length === options.count;
  if (!ok) {
    const present = await db.query(ENQUEUED_SAMPLE, [states]);
    throw new Error(
      NOT_ENQUEUED(
        String(options.count ?? 'at least one'),
        JSON.stringify({ ...options, task, states }),
        rows.length,
        states,
        present.map((r) => `${r.queue}/${r.task} ${JSON.stringify(r.args)}`),
      ),
    );
  }
  return rows.map(toJob);
}
