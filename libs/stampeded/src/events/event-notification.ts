import type { FailureKind, JobProgress } from '../interfaces/job.interface.js';
import type { FleetJobEvent } from '../interfaces/job-event.interface.js';

/**
 * A notification on "<schema>.stampeded_events", as the worker's outcome
 * statements write it (sql/jobs.sql.ts, OUTCOME_NOTIFICATION): JSON with short
 * keys, so that a hundred outcomes of one queue and task fit in one payload
 * under PostgreSQL's 8,000 bytes.
 *
 *   w  the worker that recorded the outcome (for a cancel: the one that held the job, or null)
 *   t  completed | retrying | discarded | cancelled | progress
 *   q  the queue, k  the task: null when too long to send (read from the table)
 *   j  [[job id, attempt], ...]
 *   f  the failure kind, d  the retry delay in ms, l  whether it was dead-lettered (failures)
 *   p  the progress written (progress, at most 1 KB)
 */
export interface EventNotification {
  workerId: string | null;
  outcome: 'completed' | 'retrying' | 'discarded' | 'cancelled' | 'progress';
  queue: string | null;
  task: string | null;
  jobs: [id: string, attempt: number][];
  failureKind?: FailureKind;
  retryDelayMs?: number;
  deadLettered?: boolean;
  progress?: JobProgress;
}

const OUTCOMES = new Set(['completed', 'retrying', 'discarded', 'cancelled', 'progress']);

/** The notification, or undefined for a payload that is not one (another writer on the channel). */
export function parseEventNotification(payload: string): EventNotification | undefined {
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(payload);
  } catch {
    return undefined;
  }
  if (raw === null || typeof raw !== 'object' || !OUTCOMES.has(raw.t as string) || !Array.isArray(raw.j)) return undefined;
  const jobs = raw.j.filter((e): e is [string, number] => Array.isArray(e) && typeof e[0] === 'string' && typeof e[1] === 'number');
  const text = (v: unknown) => (typeof v === 'string' ? v : null);
  const notification: EventNotification = {
    workerId: text(raw.w),
    outcome: raw.t as EventNotification['outcome'],
    queue: text(raw.q),
    task: text(raw.k),
    jobs,
  };
  if (typeof raw.f === 'string') notification.failureKind = raw.f as FailureKind;
  if (typeof raw.d === 'number') notification.retryDelayMs = raw.d;
  if (typeof raw.l === 'boolean') notification.deadLettered = raw.l;
  if (raw.p !== undefined && raw.p !== null) notification.progress = raw.p as JobProgress;
  return notification;
}

/**
 * The events a notification stands for, in the order a local worker emits
 * them: a failure is `failed`, then `retrying` or `discarded`. `names` gives
 * the queue and task of jobs whose notification left them out.
 */
export function fleetEvents(n: EventNotification, names?: ReadonlyMap<string, { queue: string; task: string }>): FleetJobEvent[] {
  const events: FleetJobEvent[] = [];
  for (const [jobId, attempt] of n.jobs) {
    const named = n.queue !== null && n.task !== null ? { queue: n.queue, task: n.task } : names?.get(jobId);
    if (!named) continue;
    const base = { origin: 'fleet' as const, jobId, queue: n.queue ?? named.queue, task: n.task ?? named.task, attempt, workerId: n.workerId };
    if (n.outcome === 'completed' || n.outcome === 'cancelled') {
      events.push({ ...base, type: n.outcome });
      continue;
    }
    if (n.outcome === 'progress') {
      events.push({ ...base, type: 'progress', progress: n.progress });
      continue;
    }
    const failure = { failureKind: n.failureKind };
    events.push({ ...base, ...failure, type: 'failed' });
    if (n.outcome === 'retrying') events.push({ ...base, ...failure, type: 'retrying', retryDelayMs: n.retryDelayMs });
    else events.push({ ...base, ...failure, type: 'discarded', deadLettered: n.deadLettered ?? false });
  }
  return events;
}
