import type { INestApplicationContext } from '@nestjs/common';
import type { Job, JobState, TaskClass } from '@stampeded/nestjs';
import {
  envelopeOf,
  instanceHandleToken,
  JOB_STATES,
  JobEncryption,
  taskNameOf,
  toJob,
  WAITING_STATES,
  type StampededInstance,
} from '@stampeded/nestjs/internal';
import type { DrainOptions, DrainResult } from '@stampeded/nestjs/internal-runtime';
import { ENQUEUED_SAMPLE, MATCHING_JOBS, OPENED_ARGS_CONTAIN } from '../sql/jobs.sql.js';
import { BAD_STATES, NOT_ENQUEUED } from '../testing.messages.js';

/**
 * Runs every due job of the app (or of one queue) to its outcome, one at a
 * time, and returns what happened: Oban's drain_queue for Stampeded. Works
 * with the background worker off (`worker: { enabled: false }`), which makes
 * tests deterministic.
 */
export function drain(app: INestApplicationContext, options: DrainOptions & InstanceOption = {}): Promise<DrainResult> {
  const { instance, ...rest } = options;
  return instanceOf(app, instance).worker.drain(rest);
}

export interface InstanceOption {
  /** The instance (forRoot's `name`) in an app with several databases. Default: the default instance. */
  instance?: string;
}

/** An instance of the app, by its handle's token: a string for every instance, so that a named instance's services never answer for the default's. */
function instanceOf(app: INestApplicationContext, instance?: string): StampededInstance {
  return app.get<string, StampededInstance>(instanceHandleToken(instance), { strict: false });
}

export interface ExpectEnqueuedOptions extends InstanceOption {
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
 * Args stored encrypted are opened with the app's keys (forRoot's
 * `encryption`), matched and returned as plaintext, as getJob() returns them.
 */
export async function expectEnqueued(app: INestApplicationContext, options: ExpectEnqueuedOptions): Promise<Job[]> {
  const instance = instanceOf(app, options.instance);
  const db = instance.database;
  const states = options.states ?? [...WAITING_STATES];
  const unknown = states.find((s) => !JOB_STATES.includes(s));
  if (unknown !== undefined) throw new Error(BAD_STATES('expectEnqueued()', unknown, JOB_STATES));
  const task = options.task === undefined ? undefined : taskNameOf(options.task);
  const encryption = new JobEncryption(instance.options, instance.queues);
  const rows = await db.query(MATCHING_JOBS, [states, task ?? null, options.queue ?? null, options.args ? JSON.stringify(options.args) : null]);
  let jobs = rows.map((row) => encryption.openForReading(toJob(row)));
  const sealed = options.args ? rows.flatMap((row, i) => (envelopeOf(row.args) ? [i] : [])) : [];
  if (sealed.length) {
    const opened = sealed.map((i) => JSON.stringify(jobs[i].args));
    const holding = new Set((await db.query(OPENED_ARGS_CONTAIN, [opened, JSON.stringify(options.args)])).map((r) => sealed[r.index as number]));
    jobs = jobs.filter((_job, i) => !sealed.includes(i) || holding.has(i));
  }
  const ok = options.count === undefined ? jobs.length > 0 : jobs.length === options.count;
  if (!ok) {
    const present = await db.query(ENQUEUED_SAMPLE, [states]);
    throw new Error(
      NOT_ENQUEUED(
        String(options.count ?? 'at least one'),
        JSON.stringify({ ...options, task, states }),
        jobs.length,
        states,
        present.map((r) => `${r.queue}/${r.task} ${JSON.stringify(encryption.readable(r.task, r.args))}`),
      ),
    );
  }
  return jobs;
}
