import type { StampededDatabase } from '../database/stampeded-database.js';
import type { JobEvents } from '../events/job-events.js';
import { EVENT_LISTENERS, eventsChannel, eventsListenerLock } from '../sql/notifications.sql.js';

/**
 * Whether any other app of the fleet listens to the job events, so that this
 * app's workers notify them only then: a NOTIFY costs every commit that sends
 * one a lock that serialises them, and wakes every listening connection of
 * the database, for events nobody may hear (bench/RESULTS.md, "Job events
 * across processes"). Apps that listen hold a shared lock on their listening
 * connection (JobEvents), counted at each heartbeat, and announce themselves
 * when they start, so that the workers start sending at once rather than at
 * their next heartbeat. This app's own listener is not counted: its workers'
 * events reach it as local events.
 */
export class FleetListeners {
  private listened = false;
  /** When an announcement last said that someone listens: a count asked for before it is out of date. */
  private announcedAt = 0;

  constructor(
    private readonly db: StampededDatabase,
    private readonly events: JobEvents,
  ) {}

  /** The key of the listeners' lock, for the heartbeat to count; null when this app sends no events. */
  get lock(): string | null {
    return this.events.fleetWide ? eventsListenerLock(this.db.schema) : null;
  }

  /** The channel to notify outcomes on; undefined while nobody else listens. */
  channel(): string | undefined {
    return this.listened ? eventsChannel(this.db.schema) : undefined;
  }

  /** Counts the listeners now: at start, before any heartbeat has. */
  async refresh(): Promise<void> {
    if (!this.events.fleetWide) return;
    const askedAt = Date.now();
    const [{ listeners }] = await this.db.query<{ listeners: number }>(EVENT_LISTENERS, [this.lock]);
    this.counted(listeners, askedAt);
  }

  /** An app announced that it listens (its instance id). */
  announced(instanceId: string): void {
    if (instanceId === this.events.instanceId) return;
    this.listened = true;
    this.announcedAt = Date.now();
  }

  /** How many connections held the lock when asked at `askedAt`. */
  counted(holders: number, askedAt: number): void {
    const others = holders - (this.events.holdsListenerLock ? 1 : 0);
    if (others > 0) this.listened = true;
    else if (askedAt > this.announcedAt) this.listened = false;
  }
}
