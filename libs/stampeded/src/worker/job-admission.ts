import type { ControlGate } from '../control/control.gate.js';
import type { RegisteredTask } from '../explorer/task.registry.js';
import type { Job } from '../interfaces/job.interface.js';
import type { ArgsValidator } from '../queue/args-validator.js';
import { INVALID_ARGS_AT_RUN, INVALID_ENCRYPTED_ARGS_AT_RUN } from '../stampeded.messages.js';
import type { RunOutcome } from './job-executor.js';
import type { JobOutcomes } from './job-outcomes.js';
import type { FailureRecord } from './outcome-recorder.js';
import type { RunningJob } from './running-jobs.js';
import { StartGrace } from './start-grace.js';

/** What admission asks of the executor that holds the job. */
export interface AdmissionHooks {
  /** The job leaves this worker's hands: it will not run. */
  settle(entry: RunningJob): void;
  /** Its deadline counts from `from`. */
  arm(entry: RunningJob, from: number): void;
  giveBack(job: Job): Promise<RunOutcome>;
}

/**
 * The checks between a claimed job and its handler, in order: args it
 * cannot open (a key this worker lacks), queue control declining to run it
 * (tenant over its share, breaker open: deferred, attempt refunded), the
 * task's validate option, and a rate limit's start grace, the last moment
 * before the handler (an isolated task's handler starts once its child
 * process has booted, after this). A single job is admitted before its
 * handler, each job of a chunk before the chunk's.
 */
export class JobAdmission {
  private readonly startGrace: StartGrace;

  constructor(
    private readonly control: ControlGate | undefined,
    private readonly outcomes: JobOutcomes,
    private readonly hooks: AdmissionHooks,
  ) {
    this.startGrace = new StartGrace(control);
  }

  /**
   * Undefined: run it. Otherwise the job has settled, and this is its
   * outcome. `armFrom`: arm its deadline from then, once queue control let
   * it through (a chunk's job has it armed when it joins its chunk).
   */
  async admit(entry: RunningJob, task: RegisteredTask, countedAt: number | undefined, armFrom?: number): Promise<RunOutcome | undefined> {
    const { job } = entry;
    if (entry.sealing.unreadable) return this.refuse(entry, { kind: 'unrecoverable', error: entry.sealing.unreadable, retryDelayMs: null });
    const refusal = this.control?.admit(job);
    if (refusal) {
      const failure = await refusal;
      if (failure) return this.refuse(entry, failure);
    }
    if (armFrom !== undefined) this.hooks.arm(entry, armFrom);
    if (task.argsValidator) {
      const invalid = await this.checkArgs(task.argsValidator, job, entry.sealing.encrypted);
      if (entry.settled) return entry.abortReason === 'cancelled' ? 'cancelled' : 'lost';
      if (invalid) return this.refuse(entry, invalid);
    }
    if (this.startGrace.passed(job, countedAt)) {
      this.hooks.settle(entry);
      return this.hooks.giveBack(job);
    }
    return undefined;
  }

  private refuse(entry: RunningJob, failure: FailureRecord): Promise<RunOutcome> {
    this.hooks.settle(entry);
    return this.outcomes.failed(entry.job, failure);
  }

  /**
   * The task's validate option on a job about to run: args that fail it
   * (a job inserted by SQL, another runtime or an older version) fail every
   * attempt alike, so the job is discarded at once, the issues in its error
   * history, rather than retried until its attempts run out.
   */
  private async checkArgs(validator: ArgsValidator, job: Job, encrypted: boolean): Promise<FailureRecord | undefined> {
    const issues = await validator.issues(job.args);
    if (!issues.length) return undefined;
    // An issue may quote the value it refuses: an encrypted job's error column gets none of them.
    const error = encrypted ? INVALID_ENCRYPTED_ARGS_AT_RUN(job.task, issues.length) : INVALID_ARGS_AT_RUN(job.task, issues);
    return { kind: 'unrecoverable', error, retryDelayMs: null };
  }
}
