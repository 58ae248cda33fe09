-- Opened on purpose: by a handler that was told to back off (HTTP 429 or 503
-- with Retry-After), or by an operator. Never shortens an open breaker.
CREATE OR REPLACE FUNCTION stampeded_breaker_trip(p_destination text, p_cooldown_ms bigint, p_by text, p_reason text)
RETURNS TABLE (state text, open_until timestamptz)
LANGUAGE sql AS $$
    INSERT INTO stampeded_breakers AS b (destination, state, opened_at, open_until, opened_by, reason)
    VALUES (p_destination, 'open', now(), now() + make_interval(secs => p_cooldown_ms / 1000.0), p_by, left(p_reason, 4000))
    ON CONFLICT (destination) DO UPDATE
       SET state = 'open', failures = 0, window_started_at = NULL, probe_by = NULL, probe_at = NULL,
           opened_at = CASE WHEN b.state = 'open' THEN b.opened_at ELSE now() END,
           open_until = greatest(CASE WHEN b.state = 'open' THEN b.open_until END, excluded.open_until),
           opened_by = excluded.opened_by, reason = excluded.reason, updated_at = now()
    RETURNING b.state, b.open_until;
$$;
