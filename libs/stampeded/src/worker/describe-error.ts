/** What a job's error history keeps of a thrown value: an Error's stack (which starts with its message), or the value as text. */
export function describeError(err: unknown): string {
  if (err instanceof Error) {
    const stack = err.stack && err.stack.includes(err.message) ? err.stack : `${err.name}: ${err.message}\n${err.stack ?? ''}`;
    return stack.trim();
  }
  if (typeof err === 'string') return err;
  try {
    return JSON.stringify(err) ?? String(err);
  } catch {
    return String(err);
  }
}
