-- Due schedules as of a given instant, so that a test clock can move time.
--
-- NULL means the server's now(): every process of a fleet then reads one
-- clock, the database's, and a process whose own clock runs ahead cannot
-- claim an occurrence early. (A late one still fires once: the occurrence
-- ledger's unique token is the backstop.)
CREATE OR REPLACE FUNCTION stampeded_claim_due_schedules(
    p_limit integer DEFAULT 100,
    p_now   timestamptz DEFAULT NULL
) RETURNS SETOF stampeded_schedules
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
        SELECT * FROM stampeded_schedules
         WHERE NOT paused AND next_run_at <= coalesce(p_now, now())
         ORDER BY next_run_at
         LIMIT p_limit
         FOR UPDATE SKIP LOCKED;
END;
$$;
