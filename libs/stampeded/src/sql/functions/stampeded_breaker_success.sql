-- A success closes the breaker from any state but an open one that has not
-- yet run its probe: a job that was already running when the breaker opened
-- proves nothing about the destination now.
CREATE OR REPLACE FUNCTION stampeded_breaker_success(p_destination text, p_probe boolean DEFAULT false)
RETURNS text
LANGUAGE sql AS $$
    UPDATE stampeded_breakers
       SET state = CASE WHEN state = 'open' THEN 'open' WHEN state = 'half_open' AND NOT p_probe THEN 'half_open' ELSE 'closed' END,
           failures = CASE WHEN state = 'closed' THEN 0 ELSE failures END,
           window_started_at = CASE WHEN state = 'closed' THEN NULL ELSE window_started_at END,
           probe_by = CASE WHEN state = 'half_open' AND p_probe THEN NULL ELSE probe_by END,
           probe_at = CASE WHEN state = 'half_open' AND p_probe THEN NULL ELSE probe_at END,
           updated_at = now()
     WHERE destination = p_destination
    RETURNING state;
$$;
