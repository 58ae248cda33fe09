import { qualify, sql } from './statement.js';

describe('qualify', () => {
  it('schema-qualifies table and function references', () => {
    const q = qualify(sql('x', `SELECT * FROM stampeded_claim_batch($1) JOIN stampeded_jobs j ON true`), 'my"schema');
    expect(q.text).toBe(`SELECT * FROM "my""schema".stampeded_claim_batch($1) JOIN "my""schema".stampeded_jobs j ON true`);
    expect(q.name).toBe('x:my"schema');
  });

  it('leaves names inside string literals and qualified names alone', () => {
    const q = qualify(sql('y', `SELECT 'stampeded_jobs_' || $1, s.stampeded_jobs, "a".stampeded_x`), 'public');
    expect(q.text).toBe(`SELECT 'stampeded_jobs_' || $1, s.stampeded_jobs, "a".stampeded_x`);
  });
});
