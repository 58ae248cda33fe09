import { Logger } from '@nestjs/common';
import type pg from 'pg';
import type { StampededDatabase } from '../database/stampeded-database.js';
import { listenTo } from '../sql/workers.sql.js';

export interface NotificationHandlers {
  /** A job became available now in this queue. */
  onInsert(queue: string): void;
  /** A job that may be running here was cancelled. */
  onCancel(jobId: string): void;
  /** (Re)connected: notifications may have been missed, look for work. */
  onConnected(): void;
}

/**
 * One connection that LISTENs for "<schema>.stampeded_insert" and
 * "<schema>.stampeded_cancel", reconnecting with backoff when it drops. A
 * missed notification costs latency, never a job: the worker polls as well.
 */
export class NotificationListener {
  private readonly logger = new Logger('Stampeded');
  private client?: pg.Client;
  private stopped = false;
  private reconnectTimer?: NodeJS.Timeout;
  private failures = 0;

  constructor(
    private readonly db: StampededDatabase,
    private readonly handlers: NotificationHandlers,
  ) {}

  get insertChannel(): string {
    return `${this.db.schema}.stampeded_insert`;
  }

  get cancelChannel(): string {
    return `${this.db.schema}.stampeded_cancel`;
  }

  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const client = this.db.newClient();
    this.client = client;
    client.on('notification', (message) => {
      if (message.channel === this.insertChannel && message.payload) this.handlers.onInsert(message.payload);
      else if (message.channel === this.cancelChannel && message.payload) this.handlers.onCancel(message.payload);
    });
    client.on('error', () => this.scheduleReconnect(client));
    client.on('end', () => this.scheduleReconnect(client));
    try {
      await client.connect();
      await client.query(listenTo([this.insertChannel, this.cancelChannel]));
      if (this.failures > 0) this.logger.log('notification connection restored');
      this.failures = 0;
      this.handlers.onConnected();
    } catch (err) {
      this.scheduleReconnect(client, err);
    }
  }

  private scheduleReconnect(client: pg.Client, err?: unknown): void {
    if (this.stopped || client !== this.client || this.reconnectTimer) return;
    this.client = undefined;
    client.end().catch(() => {});
    this.failures++;
    const delay = Math.min(30_000, 250 * 2 ** Math.min(this.failures, 7));
    if (this.failures === 1 || this.failures % 10 === 0) {
      this.logger.warn(`notification connection lost (${(err as Error)?.message ?? 'closed'}); reconnecting in ${delay} ms, polling meanwhile`);
    }
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      void this.connect();
    }, delay);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }
}
