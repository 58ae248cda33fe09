-- Closed by an operator: the jobs it deferred are due at once rather than at
-- the end of a cooldown that no longer applies. p_by, who closed it, is kept
-- in the row with the time (closed_by, closed_at) until the next close.
CREATE OR REPLACE FUNCTION stampeded_breaker_reset(p_destination text, p_by text DEFAULT NULL)
RETURNS boolean
LANGUAGE sql AS $$
    WITH closed AS (
        UPDATE stampeded_breakers
           SET state = 'closed', failures = 0, window_started_at = NULL, open_until = NULL,
               probe_by = NULL, probe_at = NULL, closed_by = p_by, closed_at = now(), updated_at = now()
         WHERE destination = p_destination
        RETURNING destination
    ), due AS (
        UPDATE stampeded_jobs j
           SET scheduled_at = now()
          FROM closed c
         WHERE j.destination = c.destination
           AND j.state = 'retryable' AND j.failure_kind = 'breaker_open' AND j.scheduled_at > now()
    )
    SELECT EXISTS (SELECT 1 FROM closed);
$$;
