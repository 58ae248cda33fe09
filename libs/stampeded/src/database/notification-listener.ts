import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import type pg from 'pg';
import { StampededDatabase } from './stampeded-database.js';
import { HOLD_SHARED_LOCK, RELEASE_SHARED_LOCK, listenTo, unlistenFrom } from '../sql/notifications.sql.js';

export interface ListenerSubscription {
  /** Each channel's handler, called with the notification's payload. */
  channels: Readonly<Record<string, (payload: string) => void>>;
  /**
   * An advisory lock key (text) that the connection holds, shared, while
   * this subscription lasts: others count its holders to know whether anyone
   * listens. A connection that drops releases it.
   */
  sharedLock?: string;
  /** Listening, first or again after a reconnect: notifications sent meanwhile were missed. */
  onConnected?(): void;
}

/**
 * The one connection of an app that LISTENs, whoever needs notifications: the
 * worker (wake-ups, cancels) and the job events and waiters (outcomes). A
 * connection per subscriber would be a connection per waiter. It opens when
 * the first subscription comes, and reconnects with backoff when it drops;
 * what was sent while it was down is not replayed, so every subscriber has a
 * way of its own to catch up (`onConnected`): the worker polls, waiters
 * re-read their jobs. Behind a transaction-mode pooler it LISTENs on the
 * direct connection the app gave (`listenConnection`), or not at all.
 */
@Injectable()
export class NotificationListener implements OnApplicationShutdown {
  private readonly logger = new Logger('Stampeded');
  private readonly subscriptions = new Set<ListenerSubscription>();
  private client?: pg.Client;
  /** The channels LISTENed on `client`. */
  private listening = new Set<string>();
  /** The shared advisory locks `client` holds. */
  private locks = new Set<string>();
  /** The subscriptions told that `client` LISTENs to their channels. */
  private told = new WeakSet<ListenerSubscription>();
  /** LISTENs and UNLISTENs, one after the other, so that the set above stays true. */
  private syncing: Promise<void> = Promise.resolve();
  private connecting?: Promise<void>;
  private stopped = false;
  private reconnectTimer?: NodeJS.Timeout;
  private failures = 0;

  constructor(private readonly db: StampededDatabase) {}

  /** Whether the connection is up and LISTENs on the channel. */
  isListening(channel: string): boolean {
    return this.client !== undefined && this.listening.has(channel);
  }

  /** Whether the connection is up and holds the shared lock. */
  holds(lock: string): boolean {
    return this.client !== undefined && this.locks.has(lock);
  }

  /**
   * Starts delivering the subscription's channels. Resolves once they are
   * LISTENed, or once the attempt failed (a reconnect is then under way, and
   * `onConnected` says when it succeeds); answers the unsubscribe.
   */
  async subscribe(subscription: ListenerSubscription): Promise<() => Promise<void>> {
    // Behind a transaction-mode pooler with no direct connection given,
    // nothing is heard: each subscriber polls instead (see db.canListen).
    if (this.stopped || !this.db.canListen) return async () => {};
    this.subscriptions.add(subscription);
    const unsubscribe = async () => {
      if (!this.subscriptions.delete(subscription)) return;
      await this.sync().catch(() => {});
    };
    // A connection being waited for (reconnectTimer) LISTENs to what is
    // wanted once it is up, and tells every subscription then.
    if (!this.connecting && !this.client && !this.reconnectTimer) this.connecting = this.connect().finally(() => (this.connecting = undefined));
    if (this.connecting) await this.connecting;
    // A connection that was up, or came up having LISTENed before this
    // subscription came, LISTENs to its channels now. A failure here is the
    // connection's: its 'error' or 'end' reconnects.
    if (this.client && !this.told.has(subscription)) {
      await this.sync().catch(() => {});
      this.tell(subscription);
    }
    return unsubscribe;
  }

  /** Says to the subscription that its channels are LISTENed on the current connection, once per connection. */
  private tell(subscription: ListenerSubscription): void {
    if (this.told.has(subscription) || !this.subscriptions.has(subscription)) return;
    if (!Object.keys(subscription.channels).every((c) => this.isListening(c))) return;
    if (subscription.sharedLock !== undefined && !this.holds(subscription.sharedLock)) return;
    this.told.add(subscription);
    subscription.onConnected?.();
  }

  private wanted(): { channels: Set<string>; locks: Set<string> } {
    const channels = new Set<string>();
    const locks = new Set<string>();
    for (const s of this.subscriptions) {
      for (const c of Object.keys(s.channels)) channels.add(c);
      if (s.sharedLock !== undefined) locks.add(s.sharedLock);
    }
    return { channels, locks };
  }

  private async connect(): Promise<void> {
    const client = this.stopped ? undefined : this.db.newListenClient();
    if (!client) return;
    this.client = client;
    this.listening = new Set();
    this.locks = new Set();
    this.told = new WeakSet();
    client.on('notification', (message) => {
      if (message.payload === undefined) return;
      for (const s of this.subscriptions) s.channels[message.channel]?.(message.payload);
    });
    client.on('error', () => this.scheduleReconnect(client));
    client.on('end', () => this.scheduleReconnect(client));
    try {
      await client.connect();
      await this.sync();
      if (this.client !== client) return;
      if (this.failures > 0) this.logger.log('notification connection restored');
      this.failures = 0;
      for (const s of [...this.subscriptions]) this.tell(s);
    } catch (err) {
      this.scheduleReconnect(client, err);
    }
  }

  /**
   * Takes the locks and LISTENs to the channels that a subscription wants,
   * and lets go of those none wants any more: locks first, so that whoever
   * counts them finds a listener no later than it hears.
   */
  private sync(): Promise<void> {
    const run = async () => {
      const client = this.client;
      if (!client) return;
      const wanted = this.wanted();
      for (const lock of wanted.locks) {
        if (this.locks.has(lock)) continue;
        await client.query(HOLD_SHARED_LOCK, [lock]);
        if (client === this.client) this.locks.add(lock);
      }
      const add = [...wanted.channels].filter((c) => !this.listening.has(c));
      const drop = [...this.listening].filter((c) => !wanted.channels.has(c));
      if (add.length) await client.query(listenTo(add));
      if (drop.length) await client.query(unlistenFrom(drop));
      if (client !== this.client) return;
      for (const c of add) this.listening.add(c);
      for (const c of drop) this.listening.delete(c);
      for (const lock of [...this.locks]) {
        if (wanted.locks.has(lock)) continue;
        await client.query(RELEASE_SHARED_LOCK, [lock]);
        this.locks.delete(lock);
      }
    };
    // A failed LISTEN is the connection failing: its 'error' or 'end' reconnects.
    const next = this.syncing.then(run, run);
    this.syncing = next.catch(() => {});
    return next;
  }

  private scheduleReconnect(client: pg.Client, err?: unknown): void {
    if (this.stopped || client !== this.client || this.reconnectTimer) return;
    this.client = undefined;
    this.listening = new Set();
    this.locks = new Set();
    client.end().catch(() => {});
    this.failures++;
    const delay = Math.min(30_000, 250 * 2 ** Math.min(this.failures, 7));
    if (this.failures === 1 || this.failures % 10 === 0) {
      this.logger.warn(
        `notification connection lost (${(err as Error)?.message ?? 'closed'}); reconnecting in ${delay} ms (the worker polls, waiters re-read their jobs meanwhile)`,
      );
    }
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      this.connecting ??= this.connect().finally(() => (this.connecting = undefined));
    }, delay);
  }

  async onApplicationShutdown(): Promise<void> {
    await this.stop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.subscriptions.clear();
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }
}
