import type { StampededDatabase } from '../database/stampeded-database.js';
import type { JobTracer } from '../tracing/job-tracer.js';
import type { RegisteredTask } from '../explorer/task.registry.js';
import { describeError } from './describe-error.js';
import type { JobRunHooks } from './job-context.js';
import { ChunkRun, type ChunkMark } from './chunk-context.js';
import { chunkSignal, type Chunks, type RunningChunk } from './chunks.js';
import type { FailureRecord } from './outcome-recorder.js';
import type { JobOutcomes } from './job-outcomes.js';
import type { RunOutcome } from './job-executor.js';
import type { RunningJob } from './running-jobs.js';
import type { WorkerEvents } from './worker-events.js';

/** What a chunk's run asks of the executor that holds its jobs. */
export interface ChunkHost {
  readonly db: StampededDatabase;
  readonly workerId: string;
  readonly hooks: JobRunHooks<RunningJob>;
  readonly outcomes: JobOutcomes;
  readonly events: WorkerEvents;
  readonly tracer?: JobTracer;
  /** The checks between a claimed job and its handler; undefined: run it, otherwise the job was settled and this is its outcome. */
  admit(entry: RunningJob, task: RegisteredTask, countedAt: number | undefined): Promise<RunOutcome | undefined>;
  /** The job leaves this worker's hands: its outcome is decided. */
  settle(entry: RunningJob): void;
  /** What the completion stores of the job's result (JobExecutor.storedResult); throws for one that cannot be stored. */
  storedResult(entry: RunningJob, task: RegisteredTask, result: unknown): string | null;
}

/**
 * Runs one chunk to its jobs' outcomes: each job admitted on its own (queue
 * control, its args, a rate limit's start grace), one handleChunk() call
 * for those admitted, then each job's outcome as the handler gave it --
 * the completions in one statement, the failures in one, each fenced by
 * its own attempt and counted against its own attempts. A job cancelled,
 * timed out or lost while the chunk ran has settled already: nothing more
 * is recorded for it.
 */
export class ChunkRunner {
  constructor(
    private readonly host: ChunkHost,
    private readonly chunks: Chunks,
  ) {}

  async run(chunk: RunningChunk): Promise<void> {
    const { task } = chunk;
    const outcomes = new Map<RunningJob, RunOutcome>();
    const waiting = chunk.entries.filter((entry) => !entry.settled);
    const refused = await Promise.all(waiting.map((entry) => this.host.admit(entry, task, chunk.countedAt.get(entry))));
    const runnable: RunningJob[] = [];
    waiting.forEach((entry, i) => {
      const outcome = refused[i];
      if (outcome) outcomes.set(entry, outcome);
      else if (!entry.settled) runnable.push(entry);
    });
    try {
      if (runnable.length) await this.runHandler(chunk, runnable, outcomes);
    } finally {
      this.chunks.release(chunk);
      for (const [entry, outcome] of outcomes) this.chunks.finish(entry, outcome);
    }
  }

  private async runHandler(chunk: RunningChunk, runnable: RunningJob[], outcomes: Map<RunningJob, RunOutcome>): Promise<void> {
    const { task } = chunk;
    const { host } = this;
    const startedAt = Date.now();
    for (const entry of runnable) {
      entry.startedAt = startedAt;
      host.events.emit('active', entry.job);
    }
    const ctx = new ChunkRun(
      host.db,
      host.workerId,
      chunk.queue,
      task.metadata.name,
      runnable.map((entry) => ({ job: entry.job, run: entry })),
      { ...host.hooks, signal: () => chunkSignal(chunk), settled: (entry) => entry.settled },
    );
    let thrown: { error: unknown } | undefined;
    try {
      await this.invoke(task, ctx, runnable);
    } catch (error) {
      thrown = { error };
    }
    // The runs' last progress and log lines go before their outcomes, while the jobs are still ours.
    await Promise.all(runnable.map((entry) => entry.reports?.flush()));
    // The slot is free while the outcomes are recorded: the next chunk may fill.
    this.chunks.release(chunk);
    const completions: { entry: RunningJob; stored: string | null; result: unknown }[] = [];
    const failures: Promise<{ entry: RunningJob; failure: FailureRecord }>[] = [];
    const others: Promise<void>[] = [];
    for (const entry of runnable) {
      // Cancelled, timed out or lost while the chunk ran: not ours to record.
      if (entry.settled) continue;
      host.settle(entry);
      const { job } = entry;
      const mark: ChunkMark | undefined = ctx.markOf(entry) ?? (thrown ? { kind: 'fail', error: thrown.error } : undefined);
      if (thrown && !ctx.markOf(entry) && entry.abortReason === 'shutdown') {
        others.push(host.outcomes.givenBack(job).then((o) => void outcomes.set(entry, o)));
      } else if (mark?.kind === 'fail') {
        failures.push(host.outcomes.raised(job, mark.error, task).then((failure) => ({ entry, failure })));
      } else if (mark?.kind === 'discard') {
        host.tracer?.raised(job, mark.error);
        failures.push(Promise.resolve({ entry, failure: { kind: 'unrecoverable', error: describeError(mark.error), retryDelayMs: null } }));
      } else if (mark?.kind === 'cancel') {
        others.push(host.outcomes.cancelled(job).then((o) => void outcomes.set(entry, o)));
      } else {
        const result = mark?.kind === 'complete' ? mark.result : undefined;
        try {
          // A result that cannot be stored fails its job as a throw would.
          completions.push({ entry, result, stored: host.storedResult(entry, task, result) });
        } catch (err) {
          failures.push(host.outcomes.raised(job, err, task).then((failure) => ({ entry, failure })));
        }
      }
    }
    // Every completion is handed to the recorder in this turn: one statement records them all.
    others.push(
      ...completions.map(({ entry, stored, result }) =>
        host.outcomes.completed(entry.job, stored, result, entry.startedAt).then((o) => void outcomes.set(entry, o)),
      ),
    );
    const failed = await Promise.all(failures);
    const recorded = await host.outcomes.failedMany(failed.map(({ entry, failure }) => ({ job: entry.job, failure })));
    failed.forEach(({ entry }, i) => outcomes.set(entry, recorded[i]));
    await Promise.all(others);
  }

  private invoke(task: RegisteredTask, ctx: ChunkRun<RunningJob>, runnable: RunningJob[]): Promise<void> {
    const call = () => Promise.resolve(task.instance.handleChunk(ctx.jobs, ctx));
    const tracer = this.host.tracer;
    if (!tracer) return call();
    // A span per job, as a single job has, each ended by its own outcome;
    // the handler's own spans nest under the first job's.
    for (const entry of runnable.slice(1)) void tracer.execute(entry.job, this.host.workerId, () => Promise.resolve());
    return tracer.execute(runnable[0].job, this.host.workerId, call);
  }
}
