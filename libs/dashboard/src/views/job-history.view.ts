import type { AttemptTimeline } from '../inspector/attempt-timeline.js';
import type { RelatedJobs } from '../inspector/related-jobs.js';
import { attemptsSection } from './job-timeline.view.js';
import { relatedSection } from './job-related.view.js';
import type { PageContext } from './layout.view.js';

/** What happened to a job, as its page shows it: its attempts drawn to scale, then the jobs related to it. */
export function jobHistorySections(ctx: PageContext, history: { timeline: AttemptTimeline; related: RelatedJobs }): string {
  return `${attemptsSection(history.timeline)}\n${relatedSection(ctx, history.related)}`;
}
