import { ResultError } from '../errors/stampeded.errors.js';
import { toJsonText } from '../queue/job-input.validator.js';
import { LIMITS } from '../stampeded.constants.js';
import { RESULT_NOT_STORABLE, RESULT_TOO_LARGE } from '../stampeded.messages.js';

/**
 * What the completion stores of a handler's return value: its JSON text, or
 * null when it returned nothing (undefined or null). Throws a ResultError,
 * which fails the attempt, for a value PostgreSQL would refuse or one over
 * LIMITS.resultBytes: checked here, before the write, because the completion
 * is one statement for a whole batch, and a value refused there would fail
 * every job of it.
 */
export function resultText(task: string, value: unknown): string | null {
  if (value === undefined || value === null) return null;
  const text = toJsonText(value, 'result', (path, problem) => {
    throw new ResultError(RESULT_NOT_STORABLE(task, `${path} ${problem}`));
  });
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > LIMITS.resultBytes) throw new ResultError(RESULT_TOO_LARGE(task, bytes, LIMITS.resultBytes));
  return text;
}
