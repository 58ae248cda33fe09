-- The queue counters' statement trigger. Each (queue, state) is spread over
-- 16 rows, `slot` 0 to 15; a transaction writes to the slot of its backend
-- (pg_backend_pid() % 16), so two transactions meet on a counter row only
-- when their connections share a slot, and claims and completions of one
-- queue do not wait on each other's commit. A count is the sum over the
-- slots, exact: every change is counted in the transaction that makes it. A
-- slot's row can go negative (jobs enqueued through one connection and
-- claimed through another); only the sum means anything. Within a slot the
-- rows a statement touches are locked in (queue, state) order, so no
-- deadlock.
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
        -- Netted before they touch the table: a state change is one upsert
        -- per (queue, state), a heartbeat none.
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
        -- Load-bearing: a fixed lock order within the slot.
        ORDER BY queue, state
        ON CONFLICT (queue, state, slot) DO UPDATE SET n = stampeded_queue_counts.n + excluded.n;
    END IF;

    RETURN NULL;
END;
$$;
