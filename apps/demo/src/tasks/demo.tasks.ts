import { Logger } from '@nestjs/common';
import { Task, UnrecoverableError, type JobContext, type TaskHandler } from '@stampeded/nestjs';

const logger = new Logger('demo');

@Task('send-welcome-email', { queue: 'emails', maxAttempts: 5 })
export class SendWelcomeEmail implements TaskHandler<{ to: string }> {
  async handle(args: { to: string }) {
    await new Promise((r) => setTimeout(r, 20 + Math.random() * 80));
    return { sent: args.to };
  }
}

/** Fails on its first two attempts, as a flaky payment API would, then succeeds. */
@Task('charge-card', { queue: 'payments', maxAttempts: 5, backoff: { baseMs: 200, maxMs: 1000 } })
export class ChargeCard implements TaskHandler<{ order: number; cents: number }> {
  async handle(args: { order: number; cents: number }, ctx: JobContext) {
    if (ctx.attempt <= 2) throw new Error(`payment gateway timeout for order ${args.order} (attempt ${ctx.attempt})`);
    return { charged: args.cents };
  }
}

/**
 * The upstream feed is broken until the demo has run its first round, and is
 * fixed some seconds after (20 s, or STAMPEDED_DEMO_FEED_FIXED_AFTER_MS): the
 * import fails every attempt and ends in the dead-letter queue; once the feed
 * is fixed, retrying the discarded job from the dashboard completes it.
 */
export const upstreamFeed = { fixedAt: Number.POSITIVE_INFINITY };

export function fixFeedLater(): void {
  upstreamFeed.fixedAt = Date.now() + Number(process.env.STAMPEDED_DEMO_FEED_FIXED_AFTER_MS ?? 20_000);
}

@Task('import-feed', { queue: 'imports', maxAttempts: 3, backoff: { baseMs: 100, maxMs: 300 }, deadLetterQueue: 'dead-letters' })
export class ImportFeed implements TaskHandler<{ url: string }> {
  async handle(args: { url: string }) {
    if (Date.now() < upstreamFeed.fixedAt) throw new Error(`feed ${args.url} is not valid XML at line 1`);
    return { imported: args.url };
  }
}

/** A bad request that no retry can fix. */
@Task('resize-image', { queue: 'media', deadLetterQueue: 'dead-letters' })
export class ResizeImage implements TaskHandler<{ width: number }> {
  async handle(args: { width: number }) {
    if (args.width <= 0) throw new UnrecoverableError(`width must be positive, got ${args.width}`);
    return { resized: args.width };
  }
}

/**
 * A long report that saves checkpoints, reports its progress (the
 * dashboard's job page shows it as a bar), logs a line a page (shown beside
 * it) and stops when its signal fires (the demo cancels one).
 */
@Task('generate-report', { queue: 'reports', expireSeconds: 30 })
export class GenerateReport implements TaskHandler<{ pages: number }> {
  async handle(args: { pages: number }, ctx: JobContext) {
    const start = (ctx.checkpoint as { page?: number } | null)?.page ?? 0;
    ctx.log(start ? `resuming at page ${start + 1} of ${args.pages}` : `rendering ${args.pages} pages`);
    for (let page = start; page < args.pages; page++) {
      if (ctx.signal.aborted) {
        logger.log(`report ${ctx.id} stopped at page ${page}: ${(ctx.signal.reason as Error)?.message}`);
        return { stoppedAt: page };
      }
      await new Promise((r) => setTimeout(r, 100));
      await ctx.saveCheckpoint({ page: page + 1 });
      await ctx.progress({ done: page + 1, total: args.pages });
      ctx.log(`page ${page + 1} rendered`);
    }
    return { pages: args.pages };
  }
}

/** A declared schedule: upserted at bootstrap, fired once per occurrence by whichever process gets there first. */
@Task('queue-digest', { queue: 'reports', schedule: { every: '30s', args: { scope: 'all' } } })
export class QueueDigest implements TaskHandler<{ scope: string }> {
  async handle(args: { scope: string }, ctx: JobContext) {
    logger.log(`digest (${args.scope}) fired: job ${ctx.id.slice(-6)}`);
  }
}

export const DEMO_TASKS = [SendWelcomeEmail, ChargeCard, ImportFeed, ResizeImage, GenerateReport, QueueDigest];
