/**
 * One SQL statement the runtime runs. Written unqualified, as a reader expects
 * SQL to read; `qualify` binds it to the schema Stampeded was installed in,
 * once, at startup. The name makes node-postgres prepare it once per
 * connection, so the hot statements are parsed and planned once.
 */
export interface Statement {
  readonly name: string;
  readonly text: string;
}

export function sql(name: string, text: string): Statement {
  return { name, text };
}

/** Quotes an identifier the way PostgreSQL's quote_ident does. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * One element of an array literal ('{...}'), double-quoted, its quotes and
 * backslashes escaped: a large array passed as its literal is built in one
 * join, where node-postgres would escape each element of a JS array through
 * a regular expression.
 */
export function arrayElement(text: string): string {
  return `"${text.replace(/[\\"]/g, '\\$&')}"`;
}

/**
 * Schema-qualifies every stampeded_* table and function name, so a statement
 * means the same thing on any connection, whatever its search_path -- the
 * caller's own transaction included.
 */
export function qualify(statement: Statement, schema: string): Statement {
  const prefix = quoteIdent(schema);
  return {
    name: `${statement.name}:${schema}`,
    // Not after a quote: 'stampeded_jobs_' in a string literal is a name being built, not a reference.
    text: statement.text.replace(/(?<![\w."'])stampeded_(?=\w)/g, `${prefix}.stampeded_`),
  };
}
