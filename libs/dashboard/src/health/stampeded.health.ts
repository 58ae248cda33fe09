import { Inject, Injectable, Module, Optional } from '@nestjs/common';
import { DEFAULT_INSTANCE, ReadDatabase, StampededDatabase, type ReplicaStatus } from '@stampeded/nestjs/internal';
import { StampededInstances } from '@stampeded/nestjs/internal-runtime';
import { MAINTENANCE_LEADER } from '../sql/health.sql.js';
import { QUEUE_STATE } from '../sql/queues.sql.js';
import { HEALTH_NO_ANSWER, NO_DEFAULT_HEALTH_INSTANCE, NO_STAMPEDED, REPLICA_DEGRADED, UNKNOWN_HEALTH_INSTANCE } from '../dashboard.messages.js';

export interface StampededHealthOptions {
  /** A queue whose next due job has waited longer than this is down. Default 300 s. */
  maxWaitSeconds?: number;
  /** Down when no process holds the maintenance leader lock. Default true. */
  requireMaintenanceLeader?: boolean;
  /** A database that has not answered by then is down. Default 3000 ms. */
  timeoutMs?: number;
  /**
   * With a replica (readConnection): the result says `degraded` when the
   * replica is further behind than this, or does not answer (its reads then
   * go to the primary). The status stays up: the queue runs on the primary
   * alone. Default 60 s.
   */
  maxReplicaLagSeconds?: number;
  /** The instance to check (forRoot's `name`), in an app with several databases. Default: the default instance. */
  instance?: string;
}

/** The shape @nestjs/terminus reads: `{ [key]: { status, ...details } }`. */
export type StampededHealthResult = Record<string, { status: 'up' | 'down'; degraded?: string; replica?: ReplicaStatus; [detail: string]: unknown }>;

/**
 * A health indicator for @nestjs/terminus, without importing it: terminus
 * (11 and later) counts an indicator whose result says `status: 'down'` as
 * failed, so this returns that shape and the package stays an optional peer.
 *
 * ```ts
 * @Get('health') @HealthCheck()
 * check() { return this.health.check([() => this.stampeded.isHealthy('stampeded', { maxWaitSeconds: 120 })]); }
 * ```
 *
 * Down when the database does not answer, when a queue's next job in claim
 * order has been due for longer than `maxWaitSeconds` (a paused or held queue
 * waits by intent and is left out), or when no process leads maintenance, so that
 * nothing reaps dead workers or prunes. With a replica, says how far
 * behind it is, and `degraded` past `maxReplicaLagSeconds`.
 */
@Injectable()
export class StampededHealthIndicator {
  constructor(
    // Absent in an app that declares only named instances: each is then checked by its name.
    @Optional() @Inject(StampededDatabase) private readonly db?: Pick<StampededDatabase, 'query' | 'schema'>,
    @Optional() @Inject(ReadDatabase) private readonly reads?: Pick<ReadDatabase, 'status'>,
    @Optional() @Inject(StampededInstances) private readonly instances?: Pick<StampededInstances, 'get' | 'names'>,
  ) {
    if (!db && !instances) throw new Error(NO_STAMPEDED('StampededHealthIndicator'));
  }

  /**
   * Every instance of an app with several databases, each under its own
   * key: `key` for the default instance, `key:<name>` for a named one. Down
   * when any of them is: a database that is down stops its instance's jobs.
   */
  async eachInstance(key = 'stampeded', options: Omit<StampededHealthOptions, 'instance'> = {}): Promise<StampededHealthResult> {
    const names = this.instances?.names() ?? [DEFAULT_INSTANCE];
    const results = await Promise.all(
      names.map((instance) => this.isHealthy(instance === DEFAULT_INSTANCE ? key : `${key}:${instance}`, { ...options, instance })),
    );
    return Object.assign({}, ...results);
  }

  async isHealthy(key = 'stampeded', options: StampededHealthOptions = {}): Promise<StampededHealthResult> {
    const { db, reads } = this.instanceOf(key, options.instance);
    const maxWaitSeconds = options.maxWaitSeconds ?? 300;
    const timeoutMs = options.timeoutMs ?? 3000;
    let queues: { queue: string; verdict: string | null; paused: boolean; head_wait_secs: number | null }[];
    let leader: boolean;
    try {
      [queues, leader] = await withTimeout(
        Promise.all([
          db.query<{ queue: string; verdict: string | null; paused: boolean; head_wait_secs: number | null }>(QUEUE_STATE),
          db.query<{ present: boolean }>(MAINTENANCE_LEADER, [db.schema]).then(([row]) => row.present),
        ]),
        timeoutMs,
      );
    } catch (err) {
      return { [key]: { status: 'down', reason: `database unreachable: ${(err as Error).message.split('\n')[0]}` } };
    }
    const waiting = Object.fromEntries(
      queues
        .filter((q) => !q.paused && q.verdict !== 'hold' && q.head_wait_secs !== null && Number(q.head_wait_secs) > maxWaitSeconds)
        .map((q) => [q.queue, Math.round(Number(q.head_wait_secs))]),
    );
    const reasons: string[] = [];
    if (Object.keys(waiting).length) reasons.push(`jobs due for more than ${maxWaitSeconds} s in ${Object.keys(waiting).join(', ')}`);
    if ((options.requireMaintenanceLeader ?? true) && !leader) reasons.push('no process leads maintenance: dead workers are not reaped, nothing is pruned');
    const details = { maintenanceLeader: leader, waitingSeconds: waiting, ...(await this.replica(reads, options.maxReplicaLagSeconds ?? 60, timeoutMs)) };
    return { [key]: reasons.length ? { status: 'down', reason: reasons.join('; '), ...details } : { status: 'up', ...details } };
  }

  private instanceOf(key: string, instance?: string): { db: Pick<StampededDatabase, 'query' | 'schema'>; reads?: Pick<ReadDatabase, 'status'> } {
    if (instance === undefined || instance === DEFAULT_INSTANCE) {
      if (this.db) return { db: this.db, reads: this.reads };
      if (instance === undefined) throw new Error(NO_DEFAULT_HEALTH_INSTANCE(key, this.instances?.names() ?? []));
    }
    const found = this.instances?.get(instance);
    if (!found) throw new Error(UNKNOWN_HEALTH_INSTANCE(instance, this.instances?.names() ?? [DEFAULT_INSTANCE]));
    return { db: found.database, reads: found.reads };
  }

  /** The replica's standing, and `degraded` when it is too far behind or down; nothing without one. */
  private async replica(
    reads: Pick<ReadDatabase, 'status'> | undefined,
    maxLagSeconds: number,
    timeoutMs: number,
  ): Promise<{ replica?: ReplicaStatus; degraded?: string }> {
    const replica = await withTimeout(reads?.status() ?? Promise.resolve(null), timeoutMs).catch((err: Error): ReplicaStatus => ({
      readingFrom: 'primary',
      caughtUp: false,
      lagSeconds: null,
      error: err.message.split('\n')[0],
    }));
    if (!replica) return {};
    const degraded = REPLICA_DEGRADED(replica, maxLagSeconds);
    return degraded ? { replica, degraded } : { replica };
  }
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(HEALTH_NO_ANSWER(ms))), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/** Provides StampededHealthIndicator; import it beside TerminusModule. Needs StampededModule in the app. */
@Module({ providers: [StampededHealthIndicator], exports: [StampededHealthIndicator] })
export class StampededHealthModule {}
