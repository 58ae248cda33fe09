import { StampededConfigError } from '../errors/stampeded.errors.js';
import type { ArgsIssue, ArgsValidateAnswer, ArgsValidateHook, StandardSchemaResult, StandardSchemaV1 } from '../interfaces/validation.interface.js';
import { INVALID_VALIDATE } from '../stampeded.messages.js';

/**
 * A task's `validate` option as one shape, whichever form it was given in:
 * what is wrong with a job's args, as messages (`items[0].sku: Required`),
 * none when they are valid. Synchronous when the option is, so that an
 * enqueue of a task with a synchronous schema waits on nothing more.
 */
export interface ArgsValidator {
  issues(args: unknown): string[] | Promise<string[]>;
}

/** The option as an ArgsValidator; refused at bootstrap when it is neither a Standard Schema nor a function. */
export function toArgsValidator(where: string, option: unknown): ArgsValidator | undefined {
  if (option === undefined) return undefined;
  // First: a schema may be callable too (an arktype type is a function).
  if (isStandardSchema(option)) return { issues: (args) => fromSchema(option, args) };
  if (typeof option === 'function') return { issues: (args) => fromHook(option as ArgsValidateHook, args) };
  throw new StampededConfigError(INVALID_VALIDATE(where, option));
}

function isStandardSchema(value: unknown): value is StandardSchemaV1 {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return false;
  const standard = (value as Partial<StandardSchemaV1>)['~standard'];
  return typeof standard === 'object' && standard !== null && typeof standard.validate === 'function';
}

function fromSchema(schema: StandardSchemaV1, args: unknown): string[] | Promise<string[]> {
  let result: StandardSchemaResult<unknown> | Promise<StandardSchemaResult<unknown>>;
  try {
    result = schema['~standard'].validate(args);
  } catch (err) {
    return [threw(err)];
  }
  return isPromise(result) ? result.then(schemaIssues, (err: unknown) => [threw(err)]) : schemaIssues(result);
}

function schemaIssues(result: StandardSchemaResult<unknown>): string[] {
  return result.issues ? result.issues.map(formatIssue) : [];
}

function fromHook(hook: ArgsValidateHook, args: unknown): string[] | Promise<string[]> {
  let answer: ArgsValidateAnswer | Promise<ArgsValidateAnswer>;
  try {
    answer = hook(args);
  } catch (err) {
    return [threw(err)];
  }
  return isPromise(answer) ? answer.then(hookIssues, (err: unknown) => [threw(err)]) : hookIssues(answer);
}

function hookIssues(answer: ArgsValidateAnswer): string[] {
  if (answer === undefined || answer === null || answer === true) return [];
  if (answer === false) return ['refused by the validate function (it returned false)'];
  if (Array.isArray(answer)) return answer.map((issue: string | ArgsIssue) => (typeof issue === 'string' ? issue : formatIssue(issue)));
  return [`the validate function answered ${typeof answer}; return the issues (an array, empty when the args are valid) or throw`];
}

/** `items[0].sku: Required`: the issue's path from the args' root, then its message. */
export function formatIssue(issue: ArgsIssue): string {
  const message = typeof issue?.message === 'string' ? issue.message : String(issue);
  if (!issue?.path?.length) return message;
  let path = '';
  for (const segment of issue.path) {
    const key = typeof segment === 'object' && segment !== null ? segment.key : segment;
    if (typeof key === 'number') path += `[${key}]`;
    else path += path ? `.${String(key)}` : String(key);
  }
  return `${path}: ${message}`;
}

/** A validation that throws refuses the args, with its error's message as the issue. */
function threw(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function isPromise<T>(value: T | Promise<T>): value is Promise<T> {
  return typeof (value as { then?: unknown } | null)?.then === 'function';
}
