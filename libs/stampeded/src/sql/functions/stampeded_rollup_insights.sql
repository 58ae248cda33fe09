-- One batch of the insights rollup (migration 19): the jobs finished after
-- the watermark and at least p_settle ago, at most about p_limit of them,
-- oldest first along the seed's finished_at index, added to the minute and
-- hour rows of stampeded_insights and the busiest keys of
-- stampeded_insight_keys; the watermark moves to the last one read, in the
-- same transaction. Answers how many jobs it read, the new watermark, and
-- whether more are waiting.
--
-- IDEMPOTENT AND SAFE BESIDE ITSELF. The watermark row is locked first, in
-- its own statement: a second call (the leader's and an operator's run)
-- waits, then reads the watermark the first one left, and each later
-- statement takes a snapshot of its own, so no job is added twice and none
-- is skipped.
--
-- SETTLED JOBS ONLY. finished_at is the finishing transaction's now(), its
-- start; a transaction that committed after a later one could hold a
-- finished_at behind the watermark, and be missed. A job is read once it
-- finished p_settle ago, longer than any transaction that finishes jobs is
-- expected to stay open.
--
-- A BATCH ENDS BETWEEN TWO finished_at VALUES. Many jobs share one (a
-- batched completion is one transaction), and the next batch starts after
-- the watermark: cut inside a tie, the rest of it would never be read. The
-- batch stops before the finished_at of the (p_limit + 1)th job, or takes
-- the whole tie when one tie is more than p_limit jobs.
--
-- WHAT IS COUNTED. completed, discarded and cancelled by the minute the job
-- finished. failed: the failed attempts in its errors (the last ten it
-- keeps), not queue control's deferrals (breaker_open, throttled: the
-- attempt was refunded), by the minute of the failure; retried: those of
-- them after which the job was due again, which is all but a discarded
-- job's terminal failure (written in the transaction that finished it, so
-- at its finished_at). A retry is counted when its job finishes. Waits
-- (claimed_at - scheduled_at) and runs (finished_at - claimed_at) are those
-- of the attempts that completed, as histogram bucket indexes: bucket 0
-- holds under 1 ms, bucket i >= 1 [2^((i-1)/p_per_octave),
-- 2^(i/p_per_octave)) ms, the last everything above.
CREATE OR REPLACE FUNCTION stampeded_rollup_insights(
    p_settle     interval,
    p_limit      integer,
    p_buckets    integer,
    p_per_octave integer,
    p_top        integer
) RETURNS TABLE (jobs integer, through timestamptz, more boolean)
LANGUAGE plpgsql
-- The batch statement's estimated cost (a histogram array built per group
-- row) is far past jit_above_cost: a server with JIT would compile it at
-- every batch, for a statement that runs in milliseconds.
SET jit = off
AS $$
DECLARE
    v_from  timestamptz;
    v_cut   timestamptz := now() - p_settle;
    v_first timestamptz;
    v_next  timestamptz;
    v_upto  timestamptz;
    v_incl  boolean;
    v_jobs  integer;
    v_last  timestamptz;
BEGIN
    SELECT w.finished_at INTO v_from FROM stampeded_insights_watermark w WHERE w.name = 'rollup' FOR UPDATE;
    v_from := coalesce(v_from, '-infinity');

    SELECT f.finished_at INTO v_first FROM stampeded_jobs f
     WHERE f.finished_at IS NOT NULL AND f.finished_at > v_from AND f.finished_at <= v_cut
     ORDER BY f.finished_at LIMIT 1;
    IF v_first IS NULL THEN
        UPDATE stampeded_insights_watermark SET finished_at = greatest(v_from, v_cut), rolled_at = now() WHERE name = 'rollup';
        RETURN QUERY SELECT 0, greatest(v_from, v_cut), false;
        RETURN;
    END IF;

    SELECT f.finished_at INTO v_next FROM stampeded_jobs f
     WHERE f.finished_at IS NOT NULL AND f.finished_at > v_from AND f.finished_at <= v_cut
     ORDER BY f.finished_at OFFSET p_limit LIMIT 1;
    IF v_next IS NULL THEN
        v_upto := v_cut;  v_incl := true;
    ELSIF v_next = v_first THEN
        v_upto := v_next; v_incl := true;
    ELSE
        v_upto := v_next; v_incl := false;
    END IF;

    -- One statement, so that the batch is read once, under one snapshot,
    -- for the counts, the histograms and the keys alike.
    -- Queue, task and key are compared in the "C" collation: grouping and
    -- ranking sort them, and on a database with a language's collation
    -- each comparison would go through it.
    WITH batch AS MATERIALIZED (
        SELECT j.queue COLLATE "C" AS queue, j.task COLLATE "C" AS task, j.state, j.finished_at, j.tenant_id, j.destination,
               -- In float8: extract() answers numeric, and a numeric ln()
               -- costs 3 us, two a job, a third of the batch. A time is whole
               -- microseconds, so it falls on a bucket's bound only where the
               -- bound is whole (1, 2, 4 ... ms), and there float8 and
               -- numeric give the same index; anywhere else the bound is
               -- further away than either's rounding.
               CASE WHEN j.state = 'completed' THEN (extract(epoch FROM j.claimed_at - j.scheduled_at) * 1000)::float8 END AS wait_ms,
               CASE WHEN j.state = 'completed' THEN (extract(epoch FROM j.finished_at - j.claimed_at) * 1000)::float8 END AS run_ms,
               CASE WHEN j.errors <> '[]'::jsonb THEN j.errors END AS errors
          FROM stampeded_jobs j
         WHERE j.finished_at IS NOT NULL AND j.finished_at > v_from AND j.finished_at <= v_upto
           AND (v_incl OR j.finished_at < v_upto)
    ),
    events AS (
        SELECT b.finished_at AS at, b.queue, b.task,
               (b.state = 'completed')::int AS completed, 0 AS failed, 0 AS retried,
               (b.state = 'discarded')::int AS discarded, (b.state = 'cancelled')::int AS cancelled,
               CASE WHEN b.wait_ms IS NULL THEN NULL WHEN b.wait_ms < 1 THEN 0
                    ELSE least(p_buckets - 1, 1 + floor(p_per_octave * ln(b.wait_ms) / ln(2))::int) END AS wait_i,
               CASE WHEN b.run_ms IS NULL THEN NULL WHEN b.run_ms < 1 THEN 0
                    ELSE least(p_buckets - 1, 1 + floor(p_per_octave * ln(b.run_ms) / ln(2))::int) END AS run_i
          FROM batch b
        UNION ALL
        SELECT (e.entry->>'at')::timestamptz, b.queue, b.task, 0, 1,
               CASE WHEN b.state = 'discarded' AND (e.entry->>'at')::timestamptz = b.finished_at THEN 0 ELSE 1 END,
               0, 0, NULL, NULL
          FROM batch b
         CROSS JOIN LATERAL jsonb_array_elements(b.errors) AS e(entry)
         WHERE b.errors IS NOT NULL AND e.entry->>'kind' NOT IN ('breaker_open', 'throttled')
    ),
    -- Each event is aggregated once, by its minute, queue and task: its
    -- counts, and apart from them its wait's and its run's bucket index
    -- (GROUPING tells the three apart: 3 the counts, 1 a wait, 2 a run).
    -- Everything below works on these few rows, not on the events: rolling
    -- the events up eight times (two grains, four levels) and building each
    -- histogram from an array of every index cost as much per job as the
    -- claim and the completion (bench/RESULTS.md, "Insights").
    fine AS (
        SELECT date_trunc('minute', e.at, 'UTC') AS minute, e.queue, e.task,
               GROUPING(e.wait_i, e.run_i) AS level,
               -- A level's own index; the other one is rolled up, so NULL.
               coalesce(e.wait_i, e.run_i) AS i,
               sum(e.completed)::int AS completed, sum(e.failed)::int AS failed, sum(e.retried)::int AS retried,
               sum(e.discarded)::int AS discarded, sum(e.cancelled)::int AS cancelled, count(*)::int AS n
          FROM events e
         GROUP BY GROUPING SETS ((date_trunc('minute', e.at, 'UTC'), e.queue, e.task),
                                 (date_trunc('minute', e.at, 'UTC'), e.queue, e.task, e.wait_i),
                                 (date_trunc('minute', e.at, 'UTC'), e.queue, e.task, e.run_i))
    ),
    -- Each of those in its minute and its hour, per queue and task, per
    -- queue, per task and in all: queue '' and task '' are "every".
    rolled AS (
        SELECT g.grain, date_trunc(g.grain, f.minute, 'UTC') AS bucket,
               coalesce(f.queue, '') AS queue, coalesce(f.task, '') AS task, f.level, f.i,
               sum(f.completed) AS completed, sum(f.failed) AS failed, sum(f.retried) AS retried,
               sum(f.discarded) AS discarded, sum(f.cancelled) AS cancelled, sum(f.n) AS n
          FROM fine f
         CROSS JOIN (VALUES ('minute'), ('hour')) AS g(grain)
         -- An event without a wait (a failure, a job not completed) is in
         -- the counts only.
         WHERE f.level = 3 OR f.i IS NOT NULL
         GROUP BY GROUPING SETS ((g.grain, date_trunc(g.grain, f.minute, 'UTC'), f.level, f.i, f.queue, f.task),
                                 (g.grain, date_trunc(g.grain, f.minute, 'UTC'), f.level, f.i, f.queue),
                                 (g.grain, date_trunc(g.grain, f.minute, 'UTC'), f.level, f.i, f.task),
                                 (g.grain, date_trunc(g.grain, f.minute, 'UTC'), f.level, f.i))
    ),
    -- A row of stampeded_insights each: its counts, and the buckets of its
    -- histograms that hold anything, with how many.
    grouped AS (
        SELECT r.grain, r.bucket, r.queue, r.task,
               (sum(r.completed) FILTER (WHERE r.level = 3))::int AS completed, (sum(r.failed) FILTER (WHERE r.level = 3))::int AS failed,
               (sum(r.retried) FILTER (WHERE r.level = 3))::int AS retried, (sum(r.discarded) FILTER (WHERE r.level = 3))::int AS discarded,
               (sum(r.cancelled) FILTER (WHERE r.level = 3))::int AS cancelled,
               array_agg(r.i) FILTER (WHERE r.level = 1) AS wait_i, array_agg(r.n) FILTER (WHERE r.level = 1) AS wait_n,
               array_agg(r.i) FILTER (WHERE r.level = 2) AS run_i, array_agg(r.n) FILTER (WHERE r.level = 2) AS run_n
          FROM rolled r
         GROUP BY r.grain, r.bucket, r.queue, r.task
    ),
    counted AS (
        INSERT INTO stampeded_insights AS s (grain, queue, task, bucket, completed, failed, retried, discarded, cancelled, wait_ms, run_ms)
        SELECT r.grain, r.queue, r.task, r.bucket, r.completed, r.failed, r.retried, r.discarded, r.cancelled,
               ARRAY(SELECT coalesce(c.n, 0)::int FROM generate_series(0, p_buckets - 1) AS i(i)
                       LEFT JOIN unnest(r.wait_i, r.wait_n) AS c(x, n) ON c.x = i.i ORDER BY i.i),
               ARRAY(SELECT coalesce(c.n, 0)::int FROM generate_series(0, p_buckets - 1) AS i(i)
                       LEFT JOIN unnest(r.run_i, r.run_n) AS c(x, n) ON c.x = i.i ORDER BY i.i)
          FROM grouped r
         -- In key order, as the queue counters do: two calls never deadlock.
         ORDER BY r.grain, r.queue, r.task, r.bucket
        ON CONFLICT (grain, queue, task, bucket) DO UPDATE
           SET completed = s.completed + excluded.completed,
               failed    = s.failed + excluded.failed,
               retried   = s.retried + excluded.retried,
               discarded = s.discarded + excluded.discarded,
               cancelled = s.cancelled + excluded.cancelled,
               wait_ms   = ARRAY(SELECT coalesce(a, 0) + coalesce(b, 0) FROM unnest(s.wait_ms, excluded.wait_ms) WITH ORDINALITY AS u(a, b, n) ORDER BY n),
               run_ms    = ARRAY(SELECT coalesce(a, 0) + coalesce(b, 0) FROM unnest(s.run_ms, excluded.run_ms) WITH ORDINALITY AS u(a, b, n) ORDER BY n)
        RETURNING 1
    ),
    -- The batch's keys counted once, by queue, task, dimension, hour and
    -- key, then rolled up from those rows as the counts are.
    key_counts AS (
        SELECT b.queue, b.task, d.dimension, date_trunc('hour', b.finished_at, 'UTC') AS bucket, d.key,
               count(*)::int AS jobs, (count(*) FILTER (WHERE b.state = 'discarded'))::int AS discarded
          FROM batch b
         CROSS JOIN LATERAL (VALUES ('tenant', b.tenant_id COLLATE "C"), ('destination', b.destination COLLATE "C")) AS d(dimension, key)
         WHERE d.key IS NOT NULL
         GROUP BY b.queue, b.task, d.dimension, date_trunc('hour', b.finished_at, 'UTC'), d.key
    ),
    -- Per queue, per task and in all (not per queue and task: a task's
    -- keys are those of its queue, or of every queue it runs in), and only
    -- the batch's own top p_top keys of each: a thousand tenants with a job
    -- each would otherwise be a thousand rows a group and batch, nearly all
    -- deleted again by the trim below (bench/RESULTS.md, "Insights").
    keyed AS (
        INSERT INTO stampeded_insight_keys AS k (queue, task, dimension, bucket, key, jobs, discarded)
        SELECT t.queue, t.task, t.dimension, t.bucket, t.key, t.jobs, t.discarded
          FROM (SELECT coalesce(y.queue, '') AS queue, coalesce(y.task, '') AS task, y.dimension, y.bucket, y.key,
                       sum(y.jobs)::int AS jobs, sum(y.discarded)::int AS discarded,
                       row_number() OVER (PARTITION BY y.queue, y.task, y.dimension, y.bucket
                                          ORDER BY sum(y.jobs) DESC, y.key) AS rank
                  FROM key_counts y
                 GROUP BY GROUPING SETS ((y.dimension, y.bucket, y.key, y.queue),
                                         (y.dimension, y.bucket, y.key, y.task),
                                         (y.dimension, y.bucket, y.key))) t
         WHERE t.rank <= p_top
         ORDER BY 1, 2, 3, 4, 5
        ON CONFLICT (queue, task, dimension, bucket, key) DO UPDATE
           SET jobs = k.jobs + excluded.jobs, discarded = k.discarded + excluded.discarded
        RETURNING 1
    )
    SELECT count(*)::int, max(b.finished_at) INTO v_jobs, v_last FROM batch b;

    -- Keep the top p_top keys of each (queue, task, dimension, hour) this
    -- batch touched: the bound on the table, whatever the number of tenants.
    DELETE FROM stampeded_insight_keys k
     USING (SELECT r.queue, r.task, r.dimension, r.bucket, r.key
              FROM (SELECT t.queue, t.task, t.dimension, t.bucket, t.key,
                           row_number() OVER (PARTITION BY t.queue, t.task, t.dimension, t.bucket ORDER BY t.jobs DESC, t.key) AS rank
                      FROM stampeded_insight_keys t
                     WHERE t.bucket >= date_trunc('hour', v_first, 'UTC') AND t.bucket <= date_trunc('hour', v_upto, 'UTC')) r
             WHERE r.rank > p_top) drop_
     WHERE k.queue = drop_.queue AND k.task = drop_.task AND k.dimension = drop_.dimension AND k.bucket = drop_.bucket AND k.key = drop_.key;

    -- After an inclusive batch every job up to v_upto is read; after one cut
    -- short, every job up to the last one read.
    IF NOT v_incl THEN
        v_upto := v_last;
    END IF;
    UPDATE stampeded_insights_watermark SET finished_at = v_upto, rolled_at = now() WHERE name = 'rollup';

    RETURN QUERY SELECT v_jobs, v_upto, v_next IS NOT NULL;
END;
$$;
