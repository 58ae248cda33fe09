import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { Subject, defer, filter, merge, type Observable, type Subscription } from 'rxjs';
import { DEFAULT_EVENTS, STAMPEDED_OPTIONS } from '../stampeded.constants.js';
import { StampededDatabase } from '../database/stampeded-database.js';
import { NotificationListener } from '../database/notification-listener.js';
import { ANNOUNCE, eventsChannel, eventsListenerLock, listeningChannel } from '../sql/notifications.sql.js';
import { EVENT_JOB_NAMES } from '../sql/jobs.sql.js';
import { fleetEvents, parseEventNotification, type EventNotification } from './event-notification.js';
import type { FleetJobEvent, JobEvent, JobEventType, LocalJobEvent } from '../interfaces/job-event.interface.js';
import type { StampededModuleOptions } from '../interfaces/stampeded-options.interface.js';

/**
 * The job events this app sees, as one stream: those of the jobs its own
 * workers run (`local$`), and with `events: 'fleet'` those of the jobs every
 * other process of the fleet runs, heard on "<schema>.stampeded_events" from
 * the statements that record their outcomes. Workers send those only while
 * some app listens: an app that listens holds a shared advisory lock on its
 * listening connection, which workers count at each heartbeat, and says so on
 * "<schema>.stampeded_listening" when it starts, so that they need not wait
 * for it. One per app: no static state.
 */
@Injectable()
export class JobEvents {
  private readonly logger = new Logger('Stampeded');
  private readonly local = new Subject<LocalJobEvent>();
  private readonly fleet = new Subject<FleetJobEvent>();
  /** Listening again after the connection dropped: the events sent meanwhile were missed. */
  private readonly reconnected = new Subject<void>();
  private readonly subscriptions: Subscription[] = [];
  /** The workers of this app: their outcomes reach this app as local events, never as notifications too. */
  private readonly ownWorkers = new Set<string>();
  private listening?: Promise<void>;
  /** Notifications are delivered in the order they came, including those whose names must be read first. */
  private delivering: Promise<void> = Promise.resolve();
  private completed = false;
  /** Names this app in its announcements, so that its own workers can tell them from others'. */
  readonly instanceId = randomUUID();

  /** The events of the jobs this app's workers run, with the job as claimed, its error and its result. */
  readonly local$: Observable<LocalJobEvent> = this.local.asObservable();

  /**
   * Every job event this app sees: its own workers' (`origin: 'local'`) and,
   * with `events: 'fleet'`, the other processes' (`origin: 'fleet'`). The
   * first subscription starts listening for the latter.
   */
  readonly events$: Observable<JobEvent> = defer(() => {
    void this.listenToFleet();
    return merge(this.local, this.fleet);
  });

  constructor(
    private readonly db: StampededDatabase,
    private readonly listener: NotificationListener,
    @Inject(STAMPEDED_OPTIONS) private readonly options: StampededModuleOptions,
  ) {}

  /**
   * Whether events of other processes reach this app (`events: 'fleet'`).
   * Behind a transaction-mode pooler with no direct connection to LISTEN
   * on, the default is `'local'`: nothing could hear the fleet's.
   */
  get fleetWide(): boolean {
    return (this.options.events ?? (this.db.canListen ? DEFAULT_EVENTS : 'local')) === 'fleet';
  }

  /** Whether this app's listening connection holds the events' lock now: its workers discount it when they count listeners. */
  get holdsListenerLock(): boolean {
    return this.listener.holds(eventsListenerLock(this.db.schema));
  }

  /** Whether anyone listens: an event nobody hears is not worth making. */
  get observed(): boolean {
    return this.local.observed;
  }

  /** Says so when the connection that hears other processes' events comes back: what they sent meanwhile is not replayed. */
  get reconnected$(): Observable<void> {
    return this.reconnected.asObservable();
  }

  /** A worker of this app, whose outcomes are emitted here as they happen. */
  addOwnWorker(workerId: string): void {
    this.ownWorkers.add(workerId);
  }

  emit(event: LocalJobEvent): void {
    this.local.next(event);
  }

  /**
   * Starts hearing other processes' events, once; resolves when the LISTEN
   * is in place (or failed, and a reconnect is under way), so that a caller
   * can read the table afterwards and miss nothing in between.
   */
  listenToFleet(): Promise<void> {
    if (!this.fleetWide || this.completed) return Promise.resolve();
    let first = true;
    return (this.listening ??= this.listener
      .subscribe({
        channels: { [eventsChannel(this.db.schema)]: (payload) => this.heard(payload) },
        sharedLock: eventsListenerLock(this.db.schema),
        onConnected: () => {
          // Workers that found nobody listening send nothing until they hear this (or count the lock).
          void this.db.query(ANNOUNCE, [listeningChannel(this.db.schema), this.instanceId]).catch(() => {});
          if (!first) this.reconnected.next();
          first = false;
        },
      })
      .then(() => {
        first = false;
      }));
  }

  private heard(payload: string): void {
    const notification = parseEventNotification(payload);
    if (!notification) return;
    if (notification.workerId !== null && this.ownWorkers.has(notification.workerId)) return;
    if (notification.queue !== null && notification.task !== null) {
      // The common case, emitted at once unless a notification that needed a read is still ahead of it.
      this.delivering = this.delivering.then(() => this.deliver(notification));
      return;
    }
    this.delivering = this.delivering.then(async () => {
      const rows = await this.db
        .query<{ id: string; queue: string; task: string }>(EVENT_JOB_NAMES, [notification.jobs.map(([id]) => id)])
        .catch((err: unknown) => {
          this.logger.warn(`could not read the names of jobs of a ${notification.outcome} event: ${(err as Error).message}`);
          return [];
        });
      // A job no longer stored (removed on completion) is left out: its queue and task are nowhere to read.
      this.deliver(notification, new Map(rows.map((r) => [r.id, r])));
    });
  }

  private deliver(notification: EventNotification, names?: ReadonlyMap<string, { queue: string; task: string }>): void {
    if (this.completed) return;
    for (const event of fleetEvents(notification, names)) this.fleet.next(event);
  }

  /** Only events of these types (and task or queue, when given). */
  of(types: JobEventType[], where: { task?: string; queue?: string } = {}): Observable<JobEvent> {
    return this.events$.pipe(
      filter((e) => types.includes(e.type) && (where.task === undefined || e.task === where.task) && (where.queue === undefined || e.queue === where.queue)),
    );
  }

  subscribe(where: { types: JobEventType[]; task?: string; queue?: string }, listener: (event: JobEvent) => unknown): void {
    this.subscriptions.push(this.of(where.types, where).subscribe((event) => void listener(event)));
  }

  /** At the very end of shutdown, after the drain's own events went out. */
  complete(): void {
    this.completed = true;
    for (const s of this.subscriptions) s.unsubscribe();
    this.local.complete();
    this.fleet.complete();
    this.reconnected.complete();
  }
}
