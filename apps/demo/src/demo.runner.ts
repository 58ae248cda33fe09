import { Injectable, Logger } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { filter, firstValueFrom, take } from 'rxjs';
import { OnJobEvent, QueueService, type JobEvent } from '@stampeded/nestjs';
import { ChargeCard, GenerateReport, ImportFeed, ResizeImage, SendWelcomeEmail, fixFeedLater } from './tasks/demo.tasks.js';

/** Enqueues a mix of jobs, follows them, and prints what happened, read from the database. */
@Injectable()
export class DemoRunner {
  private readonly logger = new Logger('demo');
  private readonly tally = new Map<string, number>();

  constructor(
    private readonly queue: QueueService,
    private readonly dataSource: DataSource,
  ) {}

  @OnJobEvent(['completed', 'retrying', 'discarded', 'cancelled'])
  onEvent(event: JobEvent) {
    this.tally.set(event.type, (this.tally.get(event.type) ?? 0) + 1);
    if (event.type !== 'completed') {
      const why = event.error ? `: ${event.error.split('\n')[0]}` : '';
      this.logger.log(`${event.type.padEnd(9)} ${event.task} #${event.jobId.slice(-6)} attempt ${event.attempt}${why}`);
    }
  }

  async run(): Promise<void> {
    const emails = await this.queue.enqueueMany(Array.from({ length: 40 }, (_, i) => ({ task: SendWelcomeEmail, args: { to: `user${i}@example.com` } })));
    // Inside the app's own transaction: the job exists only if the order does.
    await this.dataSource.transaction(async (manager) => {
      await this.queue.enqueue(ChargeCard, { order: 1001, cents: 4999 }, { manager });
    });
    const dup = await this.queue.enqueue(SendWelcomeEmail, { to: 'vip@example.com' }, { dedup: { scope: 'welcome:vip' } });
    const again = await this.queue.enqueue(SendWelcomeEmail, { to: 'vip@example.com' }, { dedup: { scope: 'welcome:vip' } });
    this.logger.log(`dedup: second enqueue returned the first job (${again.id === dup.id && again.deduplicated})`);
    await this.queue.enqueue(ImportFeed, { url: 'https://example.com/broken.xml' });
    await this.queue.enqueue(ResizeImage, { width: -1 });
    const report = await this.queue.enqueue(GenerateReport, { pages: 200 });
    this.logger.log(`enqueued ${emails.length + 5} jobs across 5 queues`);

    // Cancel the long report once it is under way.
    await firstValueFrom(
      this.queue.events$.pipe(
        filter((e) => e.type === 'active' && e.jobId === report.id),
        take(1),
      ),
    );
    await new Promise((r) => setTimeout(r, 500));
    const cancelled = await this.queue.cancel(report.id);
    this.logger.log(`cancelled the running report: ${cancelled.cancelled}`);

    await this.waitUntilSettled();
    await this.printSummary();
    fixFeedLater();
  }

  /**
   * While the demo keeps running: a trickle of new work, so the dashboard's
   * counts and throughput chart move. Stops with the app.
   */
  startTrickle(): () => void {
    let round = 0;
    const timer = setInterval(() => {
      round++;
      const jobs = Array.from({ length: 5 }, (_, i) => ({ task: SendWelcomeEmail, args: { to: `trickle${round}-${i}@example.com` } }));
      void this.queue.enqueueMany(jobs).catch(() => {});
      if (round % 5 === 0) void this.queue.enqueue(ChargeCard, { order: 2000 + round, cents: 1999 }).catch(() => {});
      if (round % 15 === 0) void this.queue.enqueue(ImportFeed, { url: `https://example.com/feed-${round}.xml` }).catch(() => {});
    }, 2000);
    timer.unref();
    return () => clearInterval(timer);
  }

  private async waitUntilSettled(): Promise<void> {
    const started = Date.now();
    let lastLine = 0;
    for (;;) {
      const counts = await this.queue.counts();
      let pending = 0;
      let done = 0;
      for (const [queue, c] of Object.entries(counts)) {
        // Dead letters wait for an operator, not for a worker.
        if (queue === 'dead-letters') continue;
        pending += c.available + c.claimed + c.executing + c.retryable;
        done += c.completed + c.discarded + c.cancelled;
      }
      if (Date.now() - lastLine > 1000) {
        this.logger.log(`progress: ${done} finished, ${pending} pending (${((Date.now() - started) / 1000).toFixed(1)} s)`);
        lastLine = Date.now();
      }
      if (pending === 0) return;
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  private async printSummary(): Promise<void> {
    const rows: Array<{ queue: string; task: string; state: string; jobs: number; attempts: number; kinds: string | null }> = await this.dataSource.query(
      `SELECT queue, task, state, count(*)::int AS jobs, max(attempt)::int AS attempts,
                string_agg(DISTINCT failure_kind, ',') AS kinds
           FROM stampeded_jobs GROUP BY queue, task, state ORDER BY queue, task, state`,
    );
    const lines = rows.map(
      (r) =>
        `  ${r.queue.padEnd(13)} ${r.task.padEnd(19)} ${r.state.padEnd(10)} ${String(r.jobs).padStart(4)} job(s)` +
        `  max attempt ${r.attempts}${r.kinds ? `  (${r.kinds})` : ''}`,
    );
    this.logger.log(`summary, from the database:\n${lines.join('\n')}`);
    const events = [...this.tally.entries()].map(([k, v]) => `${k} ${v}`).join(', ');
    this.logger.log(`events seen by this process: ${events}`);
  }
}
