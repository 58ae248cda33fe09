-- Queue counters without a hot row.
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
-- The seed's deadlock note still holds within a slot: the rows a statement
-- touches are all in its backend's slot, locked in (queue, state) order.
ALTER TABLE stampeded_queue_counts ADD COLUMN slot smallint NOT NULL DEFAULT 0;
ALTER TABLE stampeded_queue_counts DROP CONSTRAINT stampeded_queue_counts_pkey;
ALTER TABLE stampeded_queue_counts ADD PRIMARY KEY (queue, state, slot);

CREATE OR REPLACE FUNCTION stampeded_count_delta() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_slot smallint := pg_backend_pid() % 16;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO stampeded_queue_counts (queue, state, slot, n)
        SELECT queue, state, v_slot, count(*) FROM added GROUP BY queue, state
        ORDER BY queue, state
        ON CONFLICT (queue, state, slot) DO UPDATE SET n = stampeded_queue_counts.n + excluded.n;

    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO stampeded_queue_counts (queue, state, slot, n)
        SELECT queue, state, v_slot, -count(*) FROM removed GROUP BY queue, state
        ORDER BY queue, state
        ON CONFLICT (queue, state, slot) DO UPDATE SET n = stampeded_queue_counts.n + excluded.n;

    ELSE
        -- Netted before they touch the table, as the seed's: a state change
        -- is one upsert per (queue, state), a heartbeat none.
        WITH delta AS (
            SELECT queue, state, -count(*)::bigint AS d FROM removed GROUP BY queue, state
            UNION ALL
            SELECT queue, state,  count(*)::bigint     FROM added   GROUP BY queue, state
        ),
        net AS (
            SELECT queue, state, sum(d) AS d FROM delta GROUP BY queue, state HAVING sum(d) <> 0
        )
        INSERT INTO stampeded_queue_counts (queue, state, slot, n)
        SELECT queue, state, v_slot, d FROM net
        -- Load-bearing, as in the seed: a fixed lock order within the slot.
        ORDER BY queue, state
        ON CONFLICT (queue, state, slot) DO UPDATE SET n = stampeded_queue_counts.n + excluded.n;
    END IF;

    RETURN NULL;
END;
$$;

-- Readers sum the slots (QueueService.counts, the dashboard, the metrics);
-- stampeded_queue_counts_total does it for anyone else.
CREATE VIEW stampeded_queue_counts_total AS
    SELECT queue, state, sum(n)::bigint AS n
      FROM stampeded_queue_counts
     GROUP BY queue, state;

-- The recount, exact while jobs move. The seed's deleted the queue's rows and
-- counted: a transition that committed between the two was counted by the
-- count and kept its own delta only if it had waited on a deleted row, which
-- with one row per (queue, state) it always did. With slots, a transition
-- can write a slot row that did not exist when the recount deleted, commit
-- before the count's snapshot, and be counted twice. So the recount first
-- makes every slot row of the queue exist and locks it, in (state, slot)
-- order -- the order transitions lock in within their slot, so no deadlock
-- -- and transitions of the queue wait for it; the count, a statement of
-- its own, sees every transition that committed before and none that did
-- not.
CREATE OR REPLACE FUNCTION stampeded_recount_queue(p_queue text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO stampeded_queue_counts (queue, state, slot, n)
    SELECT p_queue, s.state, k.slot, 0
      FROM unnest(ARRAY['available','claimed','executing','retryable','completed','discarded','cancelled']) AS s(state)
     CROSS JOIN generate_series(0, 15) AS k(slot)
     ORDER BY s.state, k.slot
    ON CONFLICT (queue, state, slot) DO UPDATE SET n = stampeded_queue_counts.n;

    DELETE FROM stampeded_queue_counts WHERE queue = p_queue;

    INSERT INTO stampeded_queue_counts (queue, state, n)
    SELECT queue, state, count(*)
      FROM stampeded_jobs
     WHERE queue = p_queue
     GROUP BY queue, state;
END;
$$;
