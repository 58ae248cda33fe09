-- Migration 11: per-key ordering (the orderingKey enqueue option;
-- docs/ordering.md). Jobs of one queue with the same ordering_key run one at
-- a time, in the order of ordering_position, across the fleet.
--
-- ordering_key: the key, NULL for a job without one (every job before this
-- migration, and every job another runtime enqueues).
--
-- ordering_position: the job's place in its key's line. The enqueue sets it
-- to the job's id (UUIDv7, in enqueue order); a retry of a task that gives
-- up its place (ordering: { retryKeepsPlace: false }) moves it to the back
-- with a fresh UUIDv7 drawn by the worker. A uuid rather than a sequence, so
-- that the enqueue takes no lock and writes no sequence WAL.
--
-- Columns at the end of the row, NULL unless set: the claim's and the
-- completion's WAL records leave out a row's unchanged tail, and a job
-- without a key spends two bits of its null bitmap on them.
ALTER TABLE stampeded_jobs
    ADD COLUMN ordering_key      text,
    ADD COLUMN ordering_position uuid;

-- A key without a place would sort nowhere in its line: refused, for other
-- runtimes that write the key. NOT VALID: every row there is has neither, and
-- validating would read the whole table under the ALTER's lock (migration 9).
ALTER TABLE stampeded_jobs
    ADD CONSTRAINT stampeded_jobs_ordering_position_set
        CHECK (ordering_key IS NULL OR ordering_position IS NOT NULL) NOT VALID;

-- The line of each key: its unfinished jobs in order. The claim asks it
-- whether a job has an unfinished job ahead of it, one descent a keyed
-- candidate. Partial on ordering_key, so a job without a key never has an
-- entry and the plain claim and completion write nothing more.
CREATE INDEX stampeded_jobs_ordering_idx
    ON stampeded_jobs (queue, ordering_key, ordering_position)
    WHERE ordering_key IS NOT NULL
      AND state IN ('available', 'claimed', 'executing', 'retryable');

-- At most one running job per key, held by the database: the claim checks
-- for a running job of the key before it takes one, and this index refuses
-- the one interleaving that check cannot see (two claims at the same instant
-- taking different jobs of one key, each before the other commits; the
-- argument is in functions/stampeded_claim_batch.sql). The losing claim
-- fails whole and the worker claims again.
CREATE UNIQUE INDEX stampeded_jobs_ordering_running_idx
    ON stampeded_jobs (queue, ordering_key)
    WHERE ordering_key IS NOT NULL
      AND state IN ('claimed', 'executing');

-- stampeded_claim_batch returns the job's ordering_key as well: a change of
-- its result type, so the old version is dropped (the functions step makes
-- the new one in the same transaction).
DROP FUNCTION IF EXISTS stampeded_claim_batch(text, uuid, integer, timestamptz, timestamptz);
