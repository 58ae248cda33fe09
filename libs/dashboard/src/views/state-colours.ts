import type { JobState } from '@stampeded/nestjs/internal';

/**
 * How a job's state is coloured wherever the dashboard draws one: a fill
 * light enough for dark text, and a stroke that tells the states apart
 * without the fill. Keyed by the core's JobState, so a state the core adds
 * fails to compile here until it has a colour. `removed` is a workflow job
 * whose row is gone (removed on completion, or pruned).
 */
export const STATE_COLOURS: Record<JobState | 'removed', { fill: string; stroke: string }> = {
  pending: { fill: '#eef0f4', stroke: '#8a93a3' },
  available: { fill: '#e3ecfb', stroke: '#3a7bd5' },
  claimed: { fill: '#d6e4fa', stroke: '#2a66c4' },
  executing: { fill: '#c9dbf8', stroke: '#1f4f9c' },
  retryable: { fill: '#fff1cc', stroke: '#c77700' },
  completed: { fill: '#e3f1e6', stroke: '#1e7a3b' },
  discarded: { fill: '#fde2e0', stroke: '#b3261e' },
  cancelled: { fill: '#ececec', stroke: '#5b6475' },
  removed: { fill: '#f6f7f9', stroke: '#c5cad3' },
};

/** A state the map does not know (a newer core's, read by an older dashboard) draws neutral rather than failing. */
export const stateColour = (state: string) => STATE_COLOURS[state as JobState | 'removed'] ?? STATE_COLOURS.removed;
