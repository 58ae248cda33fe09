import { parseIntegerDefault } from './job-column-defaults.js';

describe('parseIntegerDefault', () => {
  it.each([
    ['25', 25],
    ['0', 0],
    ['3600000', 3_600_000],
    ["'25'::smallint", 25],
    ['(-1)', -1],
    ["'1000'::integer", 1000],
  ])('reads %s as %d', (expression, value) => {
    expect(parseIntegerDefault(expression)).toBe(value);
  });

  it.each(["'{}'::jsonb", 'now()', '(random() * (10)::double precision)', '1.5', ''])('refuses %s', (expression) => {
    expect(parseIntegerDefault(expression)).toBeUndefined();
  });
});
