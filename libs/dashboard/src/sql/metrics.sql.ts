import { sql } from '@stampeded/nestjs/internal';

/** Read at scrape time, from the counters (summed over their slots) and the policy rows: two small tables, never the jobs. */
export const METRIC_COUNTS = sql('metrics_counts', `SELECT queue, state, sum(n)::float8 AS n FROM stampeded_queue_counts GROUP BY queue, state`);

export const METRIC_VERDICTS = sql('metrics_verdicts', `SELECT queue, verdict, paused FROM stampeded_queue_policies`);

/** Circuit breakers per destination (migration 3): a small table keyed by destination. */
export const METRIC_BREAKERS = sql('metrics_breakers', `SELECT destination, state FROM stampeded_breakers`);
