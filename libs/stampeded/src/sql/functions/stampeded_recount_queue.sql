-- The recount, exact while jobs move. Deleting the queue's rows and then
-- counting is exact only while every transition of the queue must wait on a
-- row the recount deleted, as with one row per (queue, state). With slots, a
-- transition can write a slot row that did not exist when the recount
-- deleted, commit before the count's snapshot, and be counted twice. So the
-- recount first makes every slot row of the queue exist and locks it, in
-- (state, slot) order -- the order transitions lock in within their slot, so
-- no deadlock -- and transitions of the queue wait for it; the count, a
-- statement of its own, sees every transition that committed before and none
-- that did not.
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
