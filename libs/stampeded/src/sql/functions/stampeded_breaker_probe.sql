-- Asks to run the half-open probe. 'probe' to exactly one caller per cooldown;
-- 'closed' when the breaker closed meanwhile; otherwise the state, and how
-- long until it is worth asking again.
CREATE OR REPLACE FUNCTION stampeded_breaker_probe(p_destination text, p_worker_id uuid, p_probe_timeout_ms bigint)
RETURNS TABLE (verdict text, wait_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
    b stampeded_breakers%ROWTYPE;
BEGIN
    SELECT * INTO b FROM stampeded_breakers WHERE destination = p_destination FOR UPDATE;
    IF NOT FOUND OR b.state = 'closed' THEN
        RETURN QUERY SELECT 'closed'::text, 0::bigint;
        RETURN;
    END IF;
    IF (b.state = 'open' AND b.open_until IS NOT NULL AND b.open_until <= now())
       OR (b.state = 'half_open' AND b.probe_at < now() - make_interval(secs => p_probe_timeout_ms / 1000.0))
    THEN
        UPDATE stampeded_breakers
           SET state = 'half_open', probe_by = p_worker_id, probe_at = now(), updated_at = now()
         WHERE destination = p_destination;
        RETURN QUERY SELECT 'probe'::text, 0::bigint;
        RETURN;
    END IF;
    RETURN QUERY SELECT b.state,
        CASE WHEN b.state = 'open'
             THEN greatest(0, (extract(epoch FROM coalesce(b.open_until, now() + interval '1 hour') - now()) * 1000)::bigint)
             ELSE greatest(0, (extract(epoch FROM b.probe_at + make_interval(secs => p_probe_timeout_ms / 1000.0) - now()) * 1000)::bigint)
        END;
END;
$$;
