import { formatIssue, toArgsValidator } from './args-validator.js';
import type { StandardSchemaV1 } from '../interfaces/validation.interface.js';

const WHERE = "@Task('t') on T";

/** A Standard Schema that answers `answer` for any value, synchronously or not. */
function schema(answer: () => unknown): StandardSchemaV1 {
  return { '~standard': { version: 1, vendor: 'test', validate: answer as never } };
}

describe('formatIssue: where in the args, then what', () => {
  it.each([
    [{ message: 'Required' }, 'Required'],
    [{ message: 'Required', path: [] }, 'Required'],
    [{ message: 'Required', path: ['to'] }, 'to: Required'],
    [{ message: 'Required', path: ['items', 0, 'sku'] }, 'items[0].sku: Required'],
    [{ message: 'Required', path: [{ key: 'items' }, { key: 2 }] }, 'items[2]: Required'],
    [{ message: 'Bad', path: [3] }, '[3]: Bad'],
    [{ message: 'Bad', path: [Symbol('s')] }, 'Symbol(s): Bad'],
  ])('%j -> %s', (issue, text) => {
    expect(formatIssue(issue)).toBe(text);
  });
});

describe('toArgsValidator: a Standard Schema', () => {
  it('answers its issues, and none for a value', () => {
    expect(
      toArgsValidator(
        WHERE,
        schema(() => ({ value: {} })),
      )!.issues({}),
    ).toEqual([]);
    expect(
      toArgsValidator(
        WHERE,
        schema(() => ({ issues: [{ message: 'nope', path: ['a'] }] })),
      )!.issues({}),
    ).toEqual(['a: nope']);
  });

  it('stays synchronous when the schema is, and waits for one that is not', async () => {
    const sync = toArgsValidator(
      WHERE,
      schema(() => ({ value: {} })),
    )!.issues({});
    expect(Array.isArray(sync)).toBe(true);
    const later = toArgsValidator(
      WHERE,
      schema(async () => ({ issues: [{ message: 'later' }] })),
    )!.issues({});
    expect(later).toBeInstanceOf(Promise);
    expect(await later).toEqual(['later']);
  });

  it('takes a schema that throws, or rejects, as refusing the args with its message', async () => {
    const throwing = schema(() => {
      throw new Error('schema broke');
    });
    expect(toArgsValidator(WHERE, throwing)!.issues({})).toEqual(['schema broke']);
    expect(
      await toArgsValidator(
        WHERE,
        schema(() => Promise.reject(new Error('async broke'))),
      )!.issues({}),
    ).toEqual(['async broke']);
  });

  it('takes a callable schema (an arktype type is a function) as a schema, not as a validate function', () => {
    const callable = Object.assign(
      () => 'not issues',
      schema(() => ({ issues: [{ message: 'from ~standard' }] })),
    );
    expect(toArgsValidator(WHERE, callable)!.issues({})).toEqual(['from ~standard']);
  });
});

describe('toArgsValidator: a validate function', () => {
  const issuesOf = (answer: unknown) => toArgsValidator(WHERE, () => answer as never)!.issues({});

  it.each([
    ['nothing', undefined, []],
    ['null', null, []],
    ['true', true, []],
    ['an empty list', [], []],
    ['false', false, ['refused by the validate function (it returned false)']],
    ['messages', ['a: bad', 'b: worse'], ['a: bad', 'b: worse']],
    ['issues with paths', [{ message: 'Required', path: ['x', 1] }], ['x[1]: Required']],
    ['something else', 'bad', ['the validate function answered string; return the issues (an array, empty when the args are valid) or throw']],
  ])('answering %s', (_what, answer, issues) => {
    expect(issuesOf(answer)).toEqual(issues);
  });

  it('is given the args, and refuses them with the message of what it throws', async () => {
    const seen: unknown[] = [];
    const validator = toArgsValidator(WHERE, (args: unknown) => {
      seen.push(args);
      throw new Error('amount is required');
    })!;
    expect(validator.issues({ a: 1 })).toEqual(['amount is required']);
    expect(seen).toEqual([{ a: 1 }]);
    expect(await toArgsValidator(WHERE, async () => ['later'])!.issues({})).toEqual(['later']);
  });
});

describe('toArgsValidator: the option itself', () => {
  it('is nothing to check when absent', () => {
    expect(toArgsValidator(WHERE, undefined)).toBeUndefined();
  });

  it.each([[42], ['zod'], [{ parse: () => ({}) }], [{ '~standard': { version: 1 } }], [null]])('refuses %j, naming the task', (option) => {
    expect(() => toArgsValidator(WHERE, option)).toThrow(
      `${WHERE}: validate must be a Standard Schema (a zod, valibot or arktype schema: an object with "~standard") or a function (args) => issues, got`,
    );
  });
});
