-- Migration 9: a job's result and its progress, stored with the job.
--
-- result: what the handler returned, as JSON, written by the completion that
-- marks the job completed (stampeded_complete_many's p_results, in the same
-- statement and behind the same fence). NULL when the handler returned
-- nothing, when its task has storeResult: false, and on every job that has
-- not completed. A job removed on completion takes its result with it.
--
-- progress: the last value a running handler reported through
-- ctx.progress(), written by stampeded_progress, fenced as a touch is. The
-- worker writes it at most once a second per job, whatever the handler's
-- rate. It outlives the run: a completed job shows where it ended, a
-- retried one where its last attempt got to.
--
-- Columns at the end of the row, NULL unless set: a row that leaves them
-- NULL spends a bit of its null bitmap on each, and the claim's and the
-- completion's WAL records leave out a row's unchanged tail (bench/RESULTS.md
-- has the sql-cost numbers before and after).
--
-- The worker refuses a result over 64 KB and a progress over 1 KB of JSON
-- text before it writes (LIMITS in stampeded.constants.ts), with a message
-- that says what to do instead. These checks are the schema's backstop for
-- other runtimes, at the caps of args (result) and of the checkpoint
-- (progress): well above the worker's, because the binary jsonb that
-- pg_column_size measures is larger than JSON text for some values (64 KB of
-- [0,0,...] is 384 KB of jsonb: each number is a numeric), and a value the
-- worker let through must never be refused here -- in a batched completion
-- that would fail every job of the batch.
ALTER TABLE stampeded_jobs
    ADD COLUMN result   jsonb,
    ADD COLUMN progress jsonb;

-- NOT VALID: every row there is holds NULL in both, so there is nothing to
-- check, and validating would read the whole jobs table under the ALTER's
-- exclusive lock (0.5 s for a million jobs, 385 MB, from the cache; 4 ms
-- NOT VALID). Rows inserted and updated from now on are checked all the same.
-- A partition made later has them validated, being empty.
ALTER TABLE stampeded_jobs
    ADD CONSTRAINT stampeded_jobs_result_size   CHECK (pg_column_size(result) <= 1048576) NOT VALID,
    ADD CONSTRAINT stampeded_jobs_progress_size CHECK (pg_column_size(progress) <= 65536) NOT VALID;

-- stampeded_complete_many takes the results, p_results, with a default: the
-- four-argument version is dropped rather than overloaded, so that no call
-- is ambiguous, and a worker that sends four arguments still completes.
DROP FUNCTION IF EXISTS stampeded_complete_many(uuid, text[], uuid[], smallint[]);
