-- Migration 6: less work for the database per job. Each claim wrote an
-- index entry nobody searched, and a succeeded job that nobody reads again
-- was rewritten a second time to be marked completed. bench/RESULTS.md
-- ("Round two") has the measurements. The functions this migration's
-- changes go with (stampeded_claim_batch with its cursor, and
-- stampeded_complete_many with the removal) are in ../functions/.

-- No expiry index.
--
-- stampeded_jobs_expiry_idx held (claimed_at) for executing jobs, and every
-- claim added an entry to it. Its one reader, stampeded_expire, filters on
-- coalesce(heartbeat_at, claimed_at), which the index cannot search: it read
-- the index whole as the list of executing jobs. stampeded_jobs_claimed_idx
-- is that list too (state IN ('claimed','executing')), so the expirer reads
-- that one instead (test/worker/remove-on-complete.e2e-spec.ts checks the plan). Measured: 1,357
-- -> 1,289 bytes of WAL and 5.9 -> 4.9 records a claim.
DROP INDEX stampeded_jobs_expiry_idx;

-- Removal on completion.
--
-- A job enqueued with remove_on_complete is deleted by the completion that
-- would have marked it completed, as BullMQ's removeOnComplete and
-- graphile-worker's completion do: one delete record and no new row version
-- or index entry, where the update wrote the whole row again with entries in
-- the primary key and the finished index. Only success removes: a job that
-- fails, is cancelled or is discarded is kept with its errors, and its
-- dead-letter copy is made as before. The queue counters stay exact: the
-- delete is counted by the counters' DELETE trigger, so a removed job leaves
-- every count, 'completed' included. What a user gives up is in docs/enqueue.md
-- ("Removing completed jobs"): the job can no longer be read by id, and the
-- dashboard's throughput chart, which counts finished rows, does not see it.
--
-- A new column at the end of the row, where neither update changes it: the
-- updates' WAL records leave out a row's unchanged tail.
ALTER TABLE stampeded_jobs ADD COLUMN remove_on_complete boolean NOT NULL DEFAULT false;

-- stampeded_claim_batch takes a cursor, p_after; the four-argument version
-- is dropped rather than overloaded, so that no call is ambiguous.
DROP FUNCTION IF EXISTS stampeded_claim_batch(text, uuid, integer, timestamptz);
