/**
 * One statement the dashboard or the CLI runs: the same shape that
 * StampededDatabase.query() takes, which binds it to the install's schema and
 * prepares it once per connection under its name.
 */
export interface Statement {
  readonly name: string;
  readonly text: string;
}

export function sql(name: string, text: string): Statement {
  return { name, text };
}
