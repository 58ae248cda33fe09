-- Migration 8: a backoff base longer than the seed's smallint holds.
--
-- backoff_base_ms is a smallint: 32,767 ms at most. A job whose base is
-- longer keeps 32767 there -- the longest that column holds, so a runtime
-- that reads only the seed's column still backs off as long as it can -- and
-- its whole base in backoff_base_wide_ms. Every other job leaves the new
-- column NULL. A job's base is coalesce(backoff_base_wide_ms,
-- backoff_base_ms): queue/job.mapper.ts reads it so. backoffBaseColumns
-- (queue/job-input.validator.ts) splits a base into the pair; the SQL that
-- copies a job (a schedule's, a redriven dead letter) copies both.
--
-- Not ALTER COLUMN backoff_base_ms TYPE integer: that rewrites every
-- partition and rebuilds every index under an ACCESS EXCLUSIVE lock, and
-- every enqueue (the app's own transactions included), claim and completion
-- waits for it: 20 s for 1,000,000 jobs. Adding a column without a default
-- changes only the catalog; the CHECK, which keeps one way to store each
-- base, reads every row once under the same lock: under a second for the
-- same 1,000,000 jobs (docs/migrations.md; bench/migration-cost.mjs measures
-- both). A job with an ordinary base stores nothing more: its NULL is a bit
-- in the null bitmap its row has anyway.
ALTER TABLE stampeded_jobs
    ADD COLUMN backoff_base_wide_ms integer,
    ADD CONSTRAINT stampeded_jobs_backoff_base_wide_check CHECK (
        backoff_base_wide_ms IS NULL OR (backoff_base_wide_ms > 32767 AND backoff_base_ms = 32767));

-- The claim returns the new column: a new return type, so the function is
-- dropped here and created again from functions/stampeded_claim_batch.sql.
DROP FUNCTION IF EXISTS stampeded_claim_batch(text, uuid, integer, timestamptz, timestamptz);
