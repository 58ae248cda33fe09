import { ResultError } from '../errors/stampeded.errors.js';
import { LIMITS } from '../stampeded.constants.js';
import { resultText } from './job-result.js';

describe('resultText', () => {
  it('stores nothing for undefined and null: a handler that returns nothing has no result', () => {
    expect(resultText('t', undefined)).toBeNull();
    expect(resultText('t', null)).toBeNull();
  });

  it('stores any other JSON value as its JSON text', () => {
    expect(resultText('t', { url: 'https://x/y.pdf', pages: 3 })).toBe('{"url":"https://x/y.pdf","pages":3}');
    expect(resultText('t', [1, 'two'])).toBe('[1,"two"]');
    expect(resultText('t', 'done')).toBe('"done"');
    expect(resultText('t', 0)).toBe('0');
    expect(resultText('t', false)).toBe('false');
  });

  it('refuses a result over the bound, saying its size, the bound and what to do instead', () => {
    const at = 'x'.repeat(LIMITS.resultBytes - 2);
    expect(resultText('t', at)).toHaveLength(LIMITS.resultBytes);
    const over = () => resultText('render-pdf', `${at}x`);
    expect(over).toThrow(ResultError);
    expect(over).toThrow(
      `The result of task "render-pdf" is ${LIMITS.resultBytes + 1} bytes as JSON; the limit is ${LIMITS.resultBytes} bytes (64 KB). ` +
        'Store large output elsewhere (a table of your own, object storage) and return a reference to it, ' +
        'or set storeResult: false on the task to keep results out of the job.',
    );
  });

  it('counts the bound in UTF-8 bytes, not characters', () => {
    expect(() => resultText('t', 'é'.repeat(LIMITS.resultBytes / 2))).toThrow(/is 65538 bytes as JSON/);
  });

  it('refuses what PostgreSQL jsonb would refuse, naming where it is, before anything is written', () => {
    expect(() => resultText('t', { rows: [{ name: 'a\u0000b' }] })).toThrow(
      'The result of task "t" cannot be stored: result.rows[0].name contains a NUL character or an unpaired surrogate, which PostgreSQL jsonb cannot store. ' +
        'Return a JSON value, or set storeResult: false on the task to keep results out of the job.',
    );
    expect(() => resultText('t', { n: 10n })).toThrow(/result\.n is a bigint, which JSON cannot represent/);
    expect(() => resultText('t', { ratio: NaN })).toThrow(/result\.ratio is NaN/);
    expect(() => resultText('t', () => 1)).toThrow(/result is function, which JSON cannot represent/);
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(() => resultText('t', cycle)).toThrow(/result\.self refers to itself/);
  });
});
