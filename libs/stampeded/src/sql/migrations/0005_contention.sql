-- Migration 5: queue counters without a hot row. The trigger that writes
-- them (stampeded_count_delta) and the recount are in ../functions/.
--
-- MEASURED, four worker processes on one queue, 50,000 no-op jobs, 2 cores,
-- synchronous_commit on: sampling pg_stat_activity every 20 ms found a
-- quarter of the claim and completion statements waiting on
-- Lock/transactionid, each behind another claim or completion that was
-- flushing its commit (IO/WalSync). With this migration those waits are
-- gone, and four processes went from 14,000-15,400 to 14,900-17,000 jobs/s
-- (graphile-worker 15,700-17,100 in the same runs; bench/RESULTS.md).
--
-- Also measured, and not kept: claims of one queue taking turns under a
-- transaction-level advisory lock, so that each claim's snapshot is taken
-- after the previous claim committed (a claim whose snapshot predates
-- another's commit can lock a row through its update chain and then leave
-- it out, still locked). Claims then queued on the lock -- it was the most
-- sampled wait of the run -- and throughput fell to 13,000-14,000 jobs/s.

-- Every claim moves jobs from (queue, available) to (queue, executing) and
-- every completion from (queue, executing) to (queue, completed): all of
-- them upsert the (queue, executing) row of stampeded_queue_counts, and each
-- holds its lock through its commit. Across processes, claims and
-- completions ran one at a time.
--
-- Now each (queue, state) is spread over 16 rows, `slot` 0 to 15; a
-- transaction writes to the slot of its backend (pg_backend_pid() % 16), so
-- two transactions meet on a counter row only when their connections share
-- a slot. A count is the sum over the slots, exact as before: every change is
-- still counted in the transaction that makes it, and a reader's snapshot
-- sees each transaction's deltas entirely or not at all. A slot's row can
-- go negative (jobs enqueued through one connection and claimed through
-- another); only the sum means anything. stampeded_recount_queue and the
-- TRUNCATE trigger write their totals to slot 0 after deleting every slot.
--
ALTER TABLE stampeded_queue_counts ADD COLUMN slot smallint NOT NULL DEFAULT 0;
ALTER TABLE stampeded_queue_counts DROP CONSTRAINT stampeded_queue_counts_pkey;
ALTER TABLE stampeded_queue_counts ADD PRIMARY KEY (queue, state, slot);

-- Readers sum the slots (QueueService.counts, the dashboard, the metrics);
-- stampeded_queue_counts_total does it for anyone else.
CREATE VIEW stampeded_queue_counts_total AS
    SELECT queue, state, sum(n)::bigint AS n
      FROM stampeded_queue_counts
     GROUP BY queue, state;
