import { sql } from '@stampeded/nestjs/internal';

// The insights charts' reads: the rollup of migration 17, never the jobs
// table. Each reads one (grain, queue, task) run of rows, a row a point,
// through its table's primary key; queue '' and task '' are "every".

/** $1 grain, $2 queue, $3 task ('' for every), $4 seconds before the current grain's start: the points of the range, oldest first. */
export const INSIGHTS_POINTS = sql(
  'dashboard_insights_points',
  `SELECT extract(epoch FROM bucket)::bigint AS at, completed, failed, retried, discarded, cancelled, wait_ms, run_ms
     FROM stampeded_insights
    WHERE grain = $1 AND queue = $2 AND task = $3
      AND bucket >= date_trunc($1, now(), 'UTC') - make_interval(secs => $4::float8)
    ORDER BY bucket`,
);

/**
 * The busiest tenants and destinations of the hours the range touches, $4
 * of each by jobs finished. $1 queue, $2 task, $3 the range's length in
 * seconds: the hour it began in is the first read.
 */
export const INSIGHTS_KEYS = sql(
  'dashboard_insights_keys',
  `SELECT dimension, key, jobs, discarded FROM (
       SELECT dimension, key, sum(jobs)::bigint AS jobs, sum(discarded)::bigint AS discarded,
              row_number() OVER (PARTITION BY dimension ORDER BY sum(jobs) DESC, key) AS rank
         FROM stampeded_insight_keys
        WHERE queue = $1 AND task = $2 AND dimension IN ('tenant', 'destination')
          AND bucket >= date_trunc('hour', now() - make_interval(secs => $3::float8), 'UTC')
        GROUP BY dimension, key) ranked
    WHERE rank <= $4
    ORDER BY dimension, rank`,
);

/** The queues and tasks the last day's hour rows name: the filters' choices, read through the rollup's age index. */
export const INSIGHTS_NAMES = sql(
  'dashboard_insights_names',
  `SELECT DISTINCT queue, task FROM stampeded_insights
    WHERE grain = 'hour' AND bucket >= date_trunc('hour', now(), 'UTC') - interval '1 day' AND queue <> '' AND task <> ''
    ORDER BY queue, task`,
);

/** How far the rollup has read: every job finished by \`through\` is in the charts. */
export const INSIGHTS_WATERMARK = sql(
  'dashboard_insights_watermark',
  `SELECT finished_at AS through, rolled_at FROM stampeded_insights_watermark WHERE name = 'rollup'`,
);
