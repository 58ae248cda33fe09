-- A job's errors ring buffer with one more entry, newest last, capped at
-- the last 10: the one home of an error history entry, for every function
-- that records a failed attempt (stampeded_fail, and stampeded_reap for a
-- worker that stopped heartbeating).
--
-- Besides when the attempt ended, its number, kind, message (its first
-- 1,000 characters), destination and exit status, the entry keeps when the
-- attempt started (p_started_at, the job's claimed_at) and which worker ran
-- it (p_worker, its claimed_by): the job row forgets both when the attempt
-- ends, and the dashboard's attempt timeline draws each attempt from them.
-- A job that succeeds at its first attempt never writes an entry, so it
-- pays nothing for them (bench/RESULTS.md, "Attempt history").
CREATE OR REPLACE FUNCTION stampeded_push_error(
    p_errors      jsonb,
    p_attempt     smallint,
    p_kind        text,
    p_message     text,
    p_destination text,
    p_exit_status integer,
    p_started_at  timestamptz,
    p_worker      uuid
) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(e), '[]'::jsonb) FROM (
        SELECT e FROM jsonb_array_elements(
            p_errors || jsonb_build_object(
                'at',          now(),
                'attempt',     p_attempt,
                'kind',        p_kind,
                'message',     left(p_message, 1000),
                'destination', p_destination,
                'exit_status', p_exit_status,
                'started_at',  p_started_at,
                'worker',      p_worker
            )
        ) e OFFSET greatest(jsonb_array_length(p_errors) + 1 - 10, 0)
    ) t;
$$;
