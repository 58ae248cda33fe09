import { Inject, Injectable, Logger, type BeforeApplicationShutdown, type OnApplicationBootstrap } from '@nestjs/common';
import { STAMPEDED_OPTIONS } from '../stampeded.constants.js';
import { StampededDatabase } from '../database/stampeded-database.js';
import { QueueRegistry } from '../queue/queue.registry.js';
import { StampededConfigError } from '../errors/stampeded.errors.js';
import { DESTINATION_REQUIRED, INVALID_CONTROL_OPTION, PAUSE_REASON_NOT_TEXT, PAUSED_BY_REQUIRED, QUEUE_NAME_REQUIRED } from '../stampeded.messages.js';
import { durationMs } from '../maintenance/maintenance.config.js';
import { BREAKER_RESET, BREAKER_TRIP, LIST_BREAKERS, LIST_POLICIES, PAUSE_QUEUE, RESUME_QUEUE, UPSERT_POLICY } from '../sql/control.sql.js';
import type { StampededModuleOptions } from '../interfaces/stampeded-options.interface.js';
import type { Breaker, QueuePolicy, QueuePolicyRow } from '../interfaces/control.interface.js';
import type { Duration } from '../interfaces/maintenance.interface.js';
import { resolveControlConfig, validateQueuePolicy, type ControlConfig } from './control.config.js';
import { toBreaker, toPolicy } from './control.mapper.js';
import { ControlGate } from './control.gate.js';

/**
 * Queue control at run time, for the whole fleet: queue policies, pause and
 * resume, and the circuit breakers. Everything here is a row in the database
 * that every worker reads within its refresh interval.
 */
/** The policyBy of a policy a process declared with registerQueue({ policy }) and wrote at startup. */
const DECLARED_BY = 'registerQueue()';

@Injectable()
export class QueueControlService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  readonly config: ControlConfig;
  private readonly logger = new Logger('Stampeded');
  private readonly gates = new Set<ControlGate>();
  private declared?: Promise<void>;

  constructor(
    private readonly db: StampededDatabase,
    private readonly queues: QueueRegistry,
    @Inject(STAMPEDED_OPTIONS) options: StampededModuleOptions,
  ) {
    this.config = resolveControlConfig(options.control);
  }

  /** Writes the policies declared with registerQueue({ policy }); a deploy's declaration wins over an earlier setPolicy. */
  onApplicationBootstrap(): Promise<void> {
    return this.declarePolicies();
  }

  /** Once, before this process's worker reads the verdicts: its first claims already know the caps. */
  private declarePolicies(): Promise<void> {
    this.declared ??= (async () => {
      for (const name of this.queues.names()) {
        const policy = this.queues.get(name)?.policy;
        if (policy !== undefined) await this.setPolicy(name, policy, { by: DECLARED_BY });
      }
    })();
    return this.declared;
  }

  /** Writes a queue's policy for the whole fleet; `by` names who set it, kept in the row (policyBy) with the time. */
  async setPolicy(queue: string, policy: QueuePolicy, options: { by?: string } = {}): Promise<QueuePolicyRow> {
    requireName(queue, QUEUE_NAME_REQUIRED('QueueControlService.setPolicy()'));
    const { maxRunning, maxWaitSecs } = validateQueuePolicy(`QueueControlService.setPolicy(${JSON.stringify(queue)})`, policy);
    const [row] = await this.db.query(UPSERT_POLICY, [queue, maxRunning, maxWaitSecs, options.by ?? null]);
    await this.refreshGates();
    return toPolicy(row);
  }

  async policies(): Promise<QueuePolicyRow[]> {
    return (await this.db.query(LIST_POLICIES)).map(toPolicy);
  }

  async policy(queue: string): Promise<QueuePolicyRow | undefined> {
    return (await this.policies()).find((p) => p.queue === queue);
  }

  /**
   * Holds a queue for the whole fleet until resume(): no worker claims from
   * it, whatever the planner would say and however long the planner is gone.
   * Jobs already running finish. The dashboard and the CLI pause with the
   * same statement (PAUSE_QUEUE).
   */
  async pause(queue: string, by: { by: string; reason?: string }): Promise<QueuePolicyRow> {
    requireName(queue, QUEUE_NAME_REQUIRED('QueueControlService.pause()'));
    requireName(by?.by, PAUSED_BY_REQUIRED('QueueControlService.pause()'));
    if (by.reason !== undefined && typeof by.reason !== 'string')
      throw new StampededConfigError(PAUSE_REASON_NOT_TEXT('QueueControlService.pause()', by.reason));
    const [row] = await this.db.query(PAUSE_QUEUE, [queue, by.by, by.reason || null]);
    await this.refreshGates();
    return toPolicy(row);
  }

  /** Ends a pause: workers claim from the queue again, this process's at once. `by` names who resumed it in the log. */
  async resume(queue: string, by: { by?: string } = {}): Promise<QueuePolicyRow> {
    requireName(queue, QUEUE_NAME_REQUIRED('QueueControlService.resume()'));
    const [row] = await this.db.query(RESUME_QUEUE, [queue]);
    this.logger.log(`queue ${queue} resumed by ${by.by ?? 'an operator'}`);
    await this.refreshGates();
    return toPolicy(row);
  }

  async breakers(): Promise<Breaker[]> {
    return (await this.db.query(LIST_BREAKERS)).map(toBreaker);
  }

  /** Opens a destination's breaker for every worker, for `for` (default 5 minutes); its jobs are deferred until then. */
  async openBreaker(destination: string, options: { for?: Duration; by?: string; reason?: string } = {}): Promise<Breaker> {
    requireName(destination, DESTINATION_REQUIRED('QueueControlService.openBreaker()'));
    const ms = options.for === undefined ? 5 * 60_000 : durationMs('openBreaker({ for })', options.for, INVALID_CONTROL_OPTION);
    await this.db.query(BREAKER_TRIP, [destination, ms, options.by ?? 'operator', options.reason ?? 'opened by an operator']);
    await this.refreshGates();
    return (await this.breakers()).find((b) => b.destination === destination)!;
  }

  /** Closes a destination's breaker: its deferred jobs are due at once. `by` names who closed it, kept in the row (closedBy) with the time. */
  async closeBreaker(destination: string, options: { by?: string } = {}): Promise<boolean> {
    requireName(destination, DESTINATION_REQUIRED('QueueControlService.closeBreaker()'));
    const rows = await this.db.query(BREAKER_RESET, [destination, options.by ?? null]);
    await this.refreshGates();
    return rows[0]?.closed === true;
  }

  /** A worker's view of queue control; started before the worker claims anything. Internal: the worker orchestrator calls it. */
  async gateFor(workerId: string, queues: string[], concurrency: number): Promise<ControlGate> {
    await this.declarePolicies();
    const gate = new ControlGate(this.db, this.config, workerId, queues, concurrency);
    await gate.start();
    this.gates.add(gate);
    return gate;
  }

  /**
   * This process's workers see a change at once; every other process within
   * its refreshInterval (default 1 s). The dashboard calls it after it writes
   * a pause, a policy or a breaker reset with the same statements, so that
   * the workers of the process it is mounted in obey at once too.
   */
  async refreshGates(): Promise<void> {
    if (this.declared === undefined && this.gates.size === 0) return;
    await Promise.all([...this.gates].map((g) => g.refreshNow()));
  }

  async beforeApplicationShutdown(): Promise<void> {
    await Promise.all([...this.gates].map((g) => g.stop()));
    this.gates.clear();
  }
}

function requireName(value: unknown, message: string): void {
  if (typeof value !== 'string' || value.length === 0) throw new StampededConfigError(message);
}
