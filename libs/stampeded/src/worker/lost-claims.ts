import type { Logger } from '@nestjs/common';
import type { StampededDatabase } from '../database/stampeded-database.js';
import type { Job } from '../interfaces/job.interface.js';
import { UNKNOWN_CLAIMS } from '../sql/claim.sql.js';
import { LOST_CLAIMS_GIVEN_BACK, LOST_RUNS_STOPPED } from '../stampeded.messages.js';
import { isConnectionError, type OutcomeRecorder } from './outcome-recorder.js';

/**
 * Jobs that are ours in the database and unknown here, which would sit
 * 'executing' until their expire_seconds (an hour by default):
 * - a claim whose answer was lost with its connection (a restarted server, a
 *   cut connection) may have committed all the same; the fault suite's
 *   PostgreSQL restart checks it (test/reliability/chaos.e2e-spec.ts);
 * - a failover to an asynchronous standby loses the old primary's newest
 *   commits: an outcome recorded there is gone, and the new primary still
 *   has the job claimed by us (test/failover/lost-outcomes.e2e-spec.ts).
 * Once the database answers after a claim failed on its connection or the
 * server ended idle connections, and no claim is in flight, they are given
 * back without spending an attempt. A job we hold (running, buffered) or
 * whose outcome is on its way is never among them.
 */
export class LostClaims {
  /** Claim statements awaiting their answer. */
  private inFlight = 0;
  /** A claim failed on its connection: it may have committed jobs that never reached us, or the server may have failed over. */
  private possible = false;
  /** StampededDatabase.lostConnections when last looked: more since, and the server may have restarted or failed over. */
  private seenLost = 0;

  constructor(
    private readonly db: StampededDatabase,
    private readonly recorder: OutcomeRecorder,
    private readonly workerId: string,
    private readonly logger: Logger,
  ) {}

  /** Runs a claim statement, noting whether its answer was lost with its connection. */
  async track<T>(claim: () => Promise<T>): Promise<T> {
    this.inFlight++;
    try {
      return await claim();
    } catch (err) {
      if (isConnectionError(err)) this.possible = true;
      throw err;
    } finally {
      this.inFlight--;
    }
  }

  /**
   * A claim that hands back, at the same attempt, a job this worker already
   * runs (`running`: the attempt running here) or buffers: its earlier claim
   * was lost (a failover to an asynchronous standby, or the reaper gave it
   * away during a stall) and this worker claimed it again. The run under way
   * stands for the new claim, whose (worker, attempt) fence its outcome
   * passes: a second run would overlap it. Such jobs are left out.
   */
  withoutHeld<A extends { jobs: Job[] }>(answer: A, running: (jobId: string) => number | undefined, buffered: readonly Job[]): A {
    const inBuffer = buffered.length ? new Map(buffered.map((j) => [j.id, j.attempt])) : undefined;
    const held = (job: Job) => (running(job.id) ?? inBuffer?.get(job.id)) === job.attempt;
    return answer.jobs.some(held) ? { ...answer, jobs: answer.jobs.filter((job) => !held(job)) } : answer;
  }

  /**
   * Gives back the jobs we own but do not know of, if a claim failed on its
   * connection or the pool saw its connections end; `held`: whether this
   * worker has the job (running or buffered). And the other way round: a job
   * of `running` (the jobs running here before the database was asked) that
   * the database does not say is ours at its attempt lost its claim (a
   * failover to an asynchronous standby) or was given away, and another
   * worker may run it: `disown` stops it (its signal fires), as a worker
   * that lost its heartbeat stops its jobs.
   */
  async giveBack(held: (jobId: string) => boolean, running: readonly Job[] = [], disown: (job: Job) => void = () => {}): Promise<void> {
    const lost = this.db.lostConnections;
    if ((!this.possible && lost === this.seenLost) || this.inFlight > 0) return;
    const rows = await this.db.query<{ id: string; queue: string; attempt: number }>(UNKNOWN_CLAIMS, [this.workerId]);
    this.possible = false;
    this.seenLost = lost;
    const owned = new Map(rows.map((r) => [r.id, r.attempt]));
    const stale = running.filter((job) => owned.get(job.id) !== job.attempt);
    if (stale.length) {
      this.logger.warn(LOST_RUNS_STOPPED(stale.length));
      for (const job of stale) disown(job);
    }
    const unknown = rows.filter((r) => !held(r.id) && !this.recorder.isRecording(r.id));
    if (!unknown.length) return;
    this.logger.warn(LOST_CLAIMS_GIVEN_BACK(unknown.length));
    await Promise.all(unknown.map((r) => this.recorder.release({ id: r.id, queue: r.queue, attempt: r.attempt } as Job)));
  }
}
