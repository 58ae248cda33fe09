import { FINISHED_STATES, type JobState } from '@stampeded/nestjs/internal';

type FinishedState = 'completed' | 'discarded' | 'cancelled';

/**
 * What a job's page says of a result it does not have, by the job's state.
 * A job that has not finished (FINISHED_STATES) may still store one; a
 * finished one never will, and says why. Typed by state, so that a state the
 * core adds to its finished ones fails to compile here until it has its words.
 */
const NO_RESULT: Record<FinishedState, string> = {
  completed: 'none: the handler returned nothing, or its task does not store results',
  discarded: 'none: the job was discarded without completing, and only a completed job stores a result',
  cancelled: 'none: the job was cancelled without completing, and only a completed job stores a result',
};

/** The words for a job's missing result in its state. */
export function noResultText(state: JobState): string {
  return FINISHED_STATES.has(state) ? NO_RESULT[state as FinishedState] : 'none yet: stored when the job completes';
}
