-- Migration 4: indexes for what operators run -- the dashboard's pages, the
-- CLI, and redriving a dead-letter queue -- and the one it does not build,
-- for a filter by task alone (TASK FILTER below).
--
-- MEASURED by bench/dashboard-queries.mjs, 1,000,000 jobs (40% finished in
-- the last hour, 2% failing, a quarter of them dead-letter copies, 2,000 of
-- those waiting), two cores shared with other work. EXPLAIN ANALYZE's time /
-- the same with TIMING OFF / the query's wall clock, in ms, best of 3:
--
--   query                        before              after            reads
--   jobs: a task alone           454 / 712 / 607      21 /  20 /  24  the primary key, 20,000 jobs at most
--   errors by fingerprint        136 / 143 / 187      15 /  13 /  14  stampeded_jobs_failing_idx
--   redrive preview              551 / 572 / 463     0.7 / 0.6 / 1.4  stampeded_jobs_dead_letter_idx
--   redrive preview, fingerprint 414 / 578 / 482     2.8 / 2.6 / 4.5  stampeded_jobs_dead_letter_idx
--   throughput chart, last hour  348 / 271 / 235      82 /  38 /  29  the seed's finished_at index
--
-- Before, the preview read every row of the dead-letter queue's partition
-- (a sequential scan of 250,000 copies, all but 2,000 long handled), a
-- task's page walked every other queue's partition to its end (a task
-- usually lives in one queue), and the errors page visited the heap once
-- per failing job. The task's page is now a bounded scan, not an index (TASK
-- FILTER below), and the chart needed no index (THROUGHPUT CHART below).
--
-- WHAT THEY COST. Every index on stampeded_jobs is written by every statement
-- that puts a row in it, and claiming, failing and completing a job are not
-- HOT updates (each changes `state`, which the seed's claim index reads in its
-- predicate), so a row gets a new entry in every index whose predicate it
-- matches, on every change of state. A partial index whose predicate a row
-- does not match costs that row one predicate test and nothing else. Hence:
--
--   * stampeded_jobs_failing_idx and stampeded_jobs_dead_letter_idx are
--     partial, and hold only rows that the pages that read them show:
--     failing jobs, and dead-letter copies waiting to be redriven. A job that
--     succeeds on its first attempt never enters either.
--   * None of them holds a column that a heartbeat, a touch or a checkpoint
--     writes, so those updates stay HOT.
--   * An index for the task filter, (task, queue, id), would be a full one:
--     an entry per row version of every job, on insert, on claim and on
--     completion. Measured below, and not built.
--
-- WRITE COST, MEASURED: 50,000 jobs inserted 500 a statement, then claimed
-- and completed 500 a statement, one queue partition, plain SQL (no client
-- work), EXPLAIN (ANALYZE, BUFFERS, WAL) summed over the statements:
--
--                              insert                 claim + complete
--                              WAL     buffers  ms    WAL     buffers  ms
--   the seed's indexes         18.7 MB 248k     1094  48.1 MB 1127k    3582
--   + the two partial ones     18.7 MB 248k     1075  48.1 MB 1208k    3300
--   + (task, queue, id)        25.0 MB 382k     1278  57.3 MB 1433k    3566
--
-- (ms: best of 4 on two shared cores, within the noise of each other but for
-- the task index's insert.) The partial indexes write nothing for jobs that
-- do not fail. The task index added a third to the WAL of an insert and a
-- fifth to that of claiming and completing. Through the runtime, 50,000 jobs
-- enqueued by QueueService.enqueueMany() 5,000 a call into one queue, the
-- three indexes together took 7% to 21% longer (median of 6 and of 10
-- rounds, interleaved, on a loaded machine; best rounds 867 -> 1072 ms and
-- 1221 -> 1388 ms): that was the task index. Enqueue, claim and complete are
-- what the product is for; one filter of one page does not get to slow them.
--
-- TASK FILTER. Without that index, the jobs list filtered by a task alone
-- (or with a state that no partial index holds: completed, discarded,
-- cancelled) is a bounded scan, as dashboards do for a filter they have no
-- index for: a page walks at most N jobs (20,000 unless the operator asks
-- for another budget, at most 100,000) of the primary key, backwards from
-- its cursor in the list's own order, keeps those of the task, and stops at
-- a page of them or at the budget. A page costs at most N index entries and
-- N heap rows, however rare the task or large the table: 21 / 20 / 24 ms
-- (as above) on a million jobs for a page that reads its whole budget of
-- 20,000 and finds nothing, 0.3 / 0.3 / 1.7 for one that fills early.
-- When the budget runs out first, the page says so and its cursor resumes
-- from where the scan stopped, so a task far back in the table is found a
-- bounded chunk a click, never by one slow page. A filter with an index of
-- its own (a queue, tenant, destination, waiting or running state) reads
-- that index as before.
--
-- THROUGHPUT CHART. No index: the chart now counts each minute with its
-- own index-only range scan of the seed's finished_at index (60 small counts
-- instead of one hash aggregate over every job of the hour). Its cost still
-- grows with the jobs finished in the hour (480,000 here); EXPLAIN ANALYZE's
-- own clock reads, two per row per plan node, are half of its first number.
-- An index (finished_at) INCLUDE (queue, state) would let the chart split by
-- queue and outcome, but would be written by every completion of every job;
-- the chart does not split, and does not pay for it.
--
-- ON A PARTITIONED TABLE. CREATE INDEX on stampeded_jobs builds the index on
-- every partition and on each partition made later (stampeded_create_queue).
-- It cannot be CONCURRENTLY on a partitioned parent, and a migration runs in
-- one transaction anyway, so this one holds a SHARE lock on each partition
-- while it builds: enqueues and outcomes in that partition wait, about a
-- second per million rows. An install too large to pause can build each
-- partition's index CONCURRENTLY beforehand, create the parent's with
-- CREATE INDEX ... ON ONLY stampeded_jobs under the name used here, and
-- ALTER INDEX ... ATTACH PARTITION each partition's to it; this migration
-- then finds the parent's index there (IF NOT EXISTS) and builds nothing.

-- Errors grouped by fingerprint: only jobs failing now (retrying or
-- discarded), with every column the page groups by in the index, so that
-- the groups are counted from the index alone; `id` in the key gives each
-- group's newest job as its example in one descent. The seed's
-- stampeded_jobs_fingerprint_idx also holds every job that failed once and
-- then completed, and has none of these columns: read through it, the page
-- visited the heap once per failing job (107 ms for 20,000).
CREATE INDEX IF NOT EXISTS stampeded_jobs_failing_idx
    ON stampeded_jobs (error_fingerprint, id)
    INCLUDE (state, queue, task, failure_kind)
    WHERE error_fingerprint IS NOT NULL
      AND state IN ('retryable', 'discarded');

-- Dead-letter copies that a redrive would move (their predicate is the
-- redrive's own): in id order within the dead-letter queue, so a redrive
-- reads batch after batch from a cursor, with what the preview groups by.
-- Without it, a redrive read every row of the dead-letter queue's partition
-- (646 ms for a queue of 250,000 copies, all of them long since handled).
CREATE INDEX IF NOT EXISTS stampeded_jobs_dead_letter_idx
    ON stampeded_jobs (queue, id)
    INCLUDE (task, source_queue, source_id)
    WHERE source_queue IS NOT NULL
      AND state IN ('available', 'retryable', 'discarded');
