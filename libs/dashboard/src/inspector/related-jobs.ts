import { DEAD_LETTER_COPY, DEDUP_TWINS, NEIGHBOUR_SCAN, ORDERING_NEIGHBOURS, WORKFLOW_PLACE } from '../sql/related.sql.js';
import type { InspectorDatabase } from './inspector-database.js';

/** A job another one points at: enough to link to it and say where it stands. */
export interface JobRef {
  id: string;
  queue: string;
  state?: string;
  task?: string;
  name?: string;
}

/** The jobs one click away from a job's page, each null where the job has no such relation. */
export interface RelatedJobs {
  /** The job this one is a dead-letter copy of. */
  source: (JobRef & { attempts: number | null }) | null;
  /** The dead-letter copy a discarded job left in its dead_letter_queue, while it waits there; `copy` null when none waits. */
  deadLetter: { queue: string; copy: JobRef | null } | null;
  workflow: { id: string; name: string; kind: string; as: string; waitsFor: JobRef[]; waitedForBy: JobRef[] } | null;
  /** Its ordering key's jobs enqueued just before and after it in its queue, looked for among `scanned` jobs each way. */
  ordering: { key: string; before: JobRef | null; after: JobRef | null; scanned: number } | null;
  /** Unfinished jobs of its dedup scope in the periods next to its own. */
  dedup: { scope: string; period: string | null; twins: JobRef[] } | null;
}

/** How long after a job's end its dead-letter copy's id is looked for: the rest of the transaction that discarded it. */
const COPY_WINDOW_MS = 60_000;

/** The lowest or highest UUIDv7 of a millisecond: its first 48 bits are the time. */
export function uuidv7Bound(at: Date, high: boolean): string {
  const hex = Math.max(0, Math.floor(at.getTime())).toString(16).padStart(12, '0');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${high ? 'ffff-ffff-ffffffffffff' : '0000-0000-000000000000'}`;
}

/** The jobs related to one job, each through an index or a bounded read (sql/related.sql.ts). */
export class RelatedJobsInspector {
  constructor(private readonly db: InspectorDatabase) {}

  async related(job: Record<string, any>): Promise<RelatedJobs> {
    const [deadLetter, workflow, ordering, dedup] = await Promise.all([this.deadLetter(job), this.workflow(job), this.ordering(job), this.dedup(job)]);
    const source = job.source_id ? { id: String(job.source_id), queue: String(job.source_queue), attempts: job.source_attempts ?? null } : null;
    return { source, deadLetter, workflow, ordering, dedup };
  }

  private async deadLetter(job: Record<string, any>): Promise<RelatedJobs['deadLetter']> {
    if (!job.dead_letter_queue || job.state !== 'discarded' || !job.finished_at) return null;
    const end = new Date(job.finished_at);
    const [copy] = await this.db.query(DEAD_LETTER_COPY, [
      job.dead_letter_queue,
      job.id,
      uuidv7Bound(end, false),
      uuidv7Bound(new Date(end.getTime() + COPY_WINDOW_MS), true),
    ]);
    return { queue: job.dead_letter_queue, copy: copy ? { id: copy.id, queue: copy.queue, state: copy.state } : null };
  }

  private async workflow(job: Record<string, any>): Promise<RelatedJobs['workflow']> {
    if (!job.workflow_id) return null;
    const [row] = await this.db.query(WORKFLOW_PLACE, [job.id]);
    if (!row) return null;
    return { id: row.workflow_id, name: row.workflow, kind: row.kind, as: row.name, waitsFor: row.waits_for, waitedForBy: row.waited_for_by };
  }

  private async ordering(job: Record<string, any>): Promise<RelatedJobs['ordering']> {
    if (!job.ordering_key) return null;
    const rows = await this.db.query(ORDERING_NEIGHBOURS, [job.queue, job.ordering_key, job.id, NEIGHBOUR_SCAN]);
    const side = (name: string) => {
      const r = rows.find((row) => row.side === name);
      return r ? { id: r.id, queue: r.queue, state: r.state, task: r.task } : null;
    };
    return { key: job.ordering_key, before: side('before'), after: side('after'), scanned: NEIGHBOUR_SCAN };
  }

  private async dedup(job: Record<string, any>): Promise<RelatedJobs['dedup']> {
    if (!job.dedup_scope) return null;
    const twins = job.dedup_period ? await this.db.query(DEDUP_TWINS, [job.queue, job.dedup_scope, job.inserted_at, job.dedup_period]) : [];
    return {
      scope: job.dedup_scope,
      period: job.dedup_period ?? null,
      twins: twins.filter((t) => t.id !== job.id).map((t) => ({ id: t.id, queue: t.queue, state: t.state })),
    };
  }
}
