-- Migration 19: insights over time, a rollup of the finished jobs that the
-- maintenance leader keeps (stampeded_rollup_insights, InsightsRollup) and
-- the dashboard's charts read.
--
-- A ROLLUP, not reads of the jobs table. A chart of a week's outcomes and
-- percentiles read from stampeded_jobs would read every job that finished in
-- that week, and the jobs pruned since would be missing from it. The leader
-- reads each finished job once, through the seed's finished_at index (the
-- one the pruner walks), and adds it to a row per minute and per hour; a
-- chart then reads one row per point through this table's primary key
-- (bench/RESULTS.md, "Insights", has the cost of both).
--
-- stampeded_insights: per grain ('minute', 'hour'), queue, task and bucket
-- (the grain's start, in UTC): the jobs that completed, were discarded or cancelled
-- in it (by finished_at), the failed attempts and those of them after which
-- the job was due again (retried, by the time of the failure in the job's
-- errors), and two histograms, of the wait (claim minus due time) and of the
-- run (finish minus claim) of the completed jobs. A histogram is an int
-- array of fixed log-scale buckets (INSIGHTS_HISTOGRAM in
-- maintenance/insights-histogram.ts says which), so that minutes and queues
-- merge by adding arrays and any percentile is read from the sum. queue ''
-- and task '' are the rows of every queue and every task, written by the
-- same statement, so that an unfiltered chart reads as few rows as a
-- filtered one.
--
-- stampeded_insight_keys: the busiest tenants and destinations, per hour,
-- and per queue (task ''), per task (queue '') and in all, by jobs
-- finished: at most the top few of each (the rollup's p_top) are kept, so
-- the table stays small whatever the number of tenants.
--
-- stampeded_insights_watermark: one row, the finished_at up to which every
-- finished job has been rolled up; NULL before the first run, which starts
-- from the oldest finished job. The pruner deletes no finished job after it
-- (PRUNE in sql/maintenance.sql.ts), so pruning never loses history.
CREATE TABLE stampeded_insights (
    grain      text        NOT NULL CHECK (grain IN ('minute', 'hour')),
    queue      text        NOT NULL,
    task       text        NOT NULL,
    bucket     timestamptz NOT NULL,
    completed  integer     NOT NULL DEFAULT 0,
    failed     integer     NOT NULL DEFAULT 0,
    retried    integer     NOT NULL DEFAULT 0,
    discarded  integer     NOT NULL DEFAULT 0,
    cancelled  integer     NOT NULL DEFAULT 0,
    wait_ms    integer[]   NOT NULL,
    run_ms     integer[]   NOT NULL,
    PRIMARY KEY (grain, queue, task, bucket)
);

-- For the retention's deletes, which go by age alone.
CREATE INDEX stampeded_insights_bucket_idx ON stampeded_insights (grain, bucket);

CREATE TABLE stampeded_insight_keys (
    queue      text        NOT NULL,
    task       text        NOT NULL,
    dimension  text        NOT NULL CHECK (dimension IN ('tenant', 'destination')),
    bucket     timestamptz NOT NULL,
    key        text        NOT NULL,
    jobs       integer     NOT NULL,
    discarded  integer     NOT NULL,
    PRIMARY KEY (queue, task, dimension, bucket, key)
);

CREATE INDEX stampeded_insight_keys_bucket_idx ON stampeded_insight_keys (bucket);

CREATE TABLE stampeded_insights_watermark (
    name        text        PRIMARY KEY CHECK (name = 'rollup'),
    finished_at timestamptz,
    rolled_at   timestamptz
);

INSERT INTO stampeded_insights_watermark (name) VALUES ('rollup');
