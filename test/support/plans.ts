import type pg from 'pg';

/**
 * Runs `work` on `sql` with auto_explain printing the plan of every
 * statement, those inside functions and triggers included, as notices to
 * this connection, and returns the plans in the order they ran. `analyze`
 * adds actual rows and buffers (EXPLAIN ANALYZE, BUFFERS); `json` prints each
 * plan as JSON. What the planner chose inside a function is visible no other
 * way.
 */
export async function nestedPlans(sql: pg.Client, work: () => Promise<void>, options: { analyze?: boolean; json?: boolean } = {}): Promise<string[]> {
  const plans: string[] = [];
  const onNotice = (n: { message?: string }) => n.message && plans.push(n.message);
  sql.on('notice', onNotice);
  try {
    await sql.query(`LOAD 'auto_explain'`);
    await sql.query(`SET auto_explain.log_min_duration = 0`);
    await sql.query(`SET auto_explain.log_nested_statements = on`);
    await sql.query(`SET auto_explain.log_level = notice`);
    await sql.query(`SET auto_explain.log_parameter_max_length = 0`);
    await sql.query(`SET auto_explain.log_analyze = ${options.analyze ? 'on' : 'off'}`);
    await sql.query(`SET auto_explain.log_buffers = ${options.analyze ? 'on' : 'off'}`);
    await sql.query(`SET auto_explain.log_format = ${options.json ? 'json' : 'text'}`);
    await work();
  } finally {
    await sql.query(`SET auto_explain.log_min_duration = -1`);
    sql.off('notice', onNotice);
  }
  return plans;
}
