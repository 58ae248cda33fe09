-- A failure of a job sent to p_destination. Returns the breaker's state after
-- it, and whether the breaker was already open when the failure arrived (a
-- worker that had not yet heard of the trip: that job is deferred, not failed).
CREATE OR REPLACE FUNCTION stampeded_breaker_failure(
    p_destination text,
    p_threshold   integer,
    p_window_ms   bigint,
    p_cooldown_ms bigint,
    p_error       text,
    p_probe       boolean DEFAULT false
) RETURNS TABLE (state text, was_open boolean, open_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
    b stampeded_breakers%ROWTYPE;
BEGIN
    INSERT INTO stampeded_breakers (destination) VALUES (p_destination)
    ON CONFLICT (destination) DO NOTHING;
    SELECT * INTO b FROM stampeded_breakers WHERE destination = p_destination FOR UPDATE;

    IF b.state = 'open' OR (b.state = 'half_open' AND NOT p_probe) THEN
        RETURN QUERY SELECT b.state, true,
            greatest(0, (extract(epoch FROM coalesce(b.open_until, now()) - now()) * 1000)::bigint);
        RETURN;
    END IF;

    IF b.state = 'half_open' OR
       (CASE WHEN b.window_started_at IS NULL
                  OR b.window_started_at < now() - make_interval(secs => p_window_ms / 1000.0)
             THEN 1 ELSE b.failures + 1 END) >= p_threshold
    THEN
        UPDATE stampeded_breakers
           SET state = 'open', failures = 0, window_started_at = NULL,
               opened_at = now(), open_until = now() + make_interval(secs => p_cooldown_ms / 1000.0),
               probe_by = NULL, probe_at = NULL, opened_by = 'failures',
               reason = left(p_error, 4000), updated_at = now()
         WHERE destination = p_destination;
        RETURN QUERY SELECT 'open'::text, false, p_cooldown_ms;
        RETURN;
    END IF;

    UPDATE stampeded_breakers
       SET failures = CASE WHEN b.window_started_at IS NULL
                                OR b.window_started_at < now() - make_interval(secs => p_window_ms / 1000.0)
                           THEN 1 ELSE b.failures + 1 END,
           window_started_at = CASE WHEN b.window_started_at IS NULL
                                     OR b.window_started_at < now() - make_interval(secs => p_window_ms / 1000.0)
                                    THEN now() ELSE b.window_started_at END,
           reason = left(p_error, 4000), updated_at = now()
     WHERE destination = p_destination;
    RETURN QUERY SELECT 'closed'::text, false, 0::bigint;
END;
$$;
