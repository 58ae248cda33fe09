-- Migration 5: flow control. Queue policies already have their table in the
-- seed; this adds what the planner measures, the fleet's circuit breakers,
-- and a claim that passes over the tenants that are at their share.

-- Claimed plus executing when the planner decided, so that a worker can tell
-- how much room a capped queue had left without counting the jobs itself.
-- No index: the planner rewrites these rows every few seconds and the updates
-- must stay HOT.
ALTER TABLE stampeded_queue_policies ADD COLUMN running integer;

-- One row per destination whose breaker has ever moved. The whole fleet reads
-- and writes the same rows, so that one process seeing a downstream fail
-- spares every other process the same failures.
--
--   closed     jobs run; `failures` counts recent failures within the window
--   open       jobs are deferred (breaker_open, attempt refunded) until open_until
--   half_open  one job, the probe, runs; its success closes the breaker, its
--              failure opens it for another cooldown
CREATE TABLE stampeded_breakers (
    destination    text        PRIMARY KEY,
    state          text        NOT NULL DEFAULT 'closed'
                               CHECK (state IN ('closed', 'open', 'half_open')),
    failures       integer     NOT NULL DEFAULT 0 CHECK (failures >= 0),
    window_started_at timestamptz,
    opened_at      timestamptz,
    open_until     timestamptz,
    -- Who holds the half-open probe, and since when: a probe whose worker
    -- died is handed to another worker once it is as old as a cooldown.
    probe_by       uuid,
    probe_at       timestamptz,
    -- 'failures', 'handler' (a 429 or 503 with Retry-After), or the operator's name.
    opened_by      text,
    reason         text        CHECK (length(reason) <= 4000),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- A failure of a job sent to p_destination. Returns the breaker's state after
-- it, and whether the breaker was already open when the failure arrived (a
-- worker that had not yet heard of the trip: that job is deferred, not failed).
CREATE FUNCTION stampeded_breaker_failure(
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

-- A success closes the breaker from any state but an open one that has not
-- yet run its probe: a job that was already running when the breaker opened
-- proves nothing about the destination now.
CREATE FUNCTION stampeded_breaker_success(p_destination text, p_probe boolean DEFAULT false)
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

-- Asks to run the half-open probe. 'probe' to exactly one caller per cooldown;
-- 'closed' when the breaker closed meanwhile; otherwise the state, and how
-- long until it is worth asking again.
CREATE FUNCTION stampeded_breaker_probe(p_destination text, p_worker_id uuid, p_probe_timeout_ms bigint)
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

-- Opened on purpose: by a handler that was told to back off (HTTP 429 or 503
-- with Retry-After), or by an operator. Never shortens an open breaker.
CREATE FUNCTION stampeded_breaker_trip(p_destination text, p_cooldown_ms bigint, p_by text, p_reason text)
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

-- Closed by an operator: the jobs it deferred are due at once rather than at
-- the end of a cooldown that no longer applies.
CREATE FUNCTION stampeded_breaker_reset(p_destination text)
RETURNS boolean
LANGUAGE sql AS $$
    WITH closed AS (
        UPDATE stampeded_breakers
           SET state = 'closed', failures = 0, window_started_at = NULL, open_until = NULL,
               probe_by = NULL, probe_at = NULL, updated_at = now()
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

-- stampeded_claim for a queue whose tenants compete for this worker's slots:
-- up to p_per_tenant jobs of each tenant in p_tenants (those with work and
-- with room in this worker), each tenant's in its own claim order, read
-- through the tenant index. Taking the head of the queue instead and
-- filtering it cannot work: behind a 10,000-job flood the head is all flood,
-- and the small tenants were never reached (measured: they waited for the
-- whole flood). Jobs without a tenant are claimed alongside, as one more
-- tenant.
CREATE FUNCTION stampeded_claim_fair(
    p_queue        text,
    p_worker_id    uuid,
    p_limit        integer,
    p_now          timestamptz,
    p_tenants      text[],
    p_per_tenant   integer
) RETURNS SETOF stampeded_jobs
LANGUAGE sql AS $$
    WITH candidate AS MATERIALIZED (
        SELECT c.id, c.priority, c.scheduled_at
          FROM unnest(p_tenants) AS t(tenant_id)
         CROSS JOIN LATERAL (
               SELECT id, priority, scheduled_at FROM stampeded_jobs
                WHERE queue        = p_queue
                  AND tenant_id    = t.tenant_id
                  AND state        IN ('available','retryable')
                  AND scheduled_at <= coalesce(p_now, now())
                  AND attempt      < max_attempts
                ORDER BY priority, scheduled_at
                LIMIT p_per_tenant
                FOR UPDATE SKIP LOCKED) c
        UNION ALL
        SELECT id, priority, scheduled_at FROM (
               SELECT id, priority, scheduled_at FROM stampeded_jobs
                WHERE queue        = p_queue
                  AND tenant_id    IS NULL
                  AND state        IN ('available','retryable')
                  AND scheduled_at <= coalesce(p_now, now())
                  AND attempt      < max_attempts
                ORDER BY priority, scheduled_at
                LIMIT p_per_tenant
                FOR UPDATE SKIP LOCKED) n
    ),
    picked AS (
        SELECT id FROM candidate ORDER BY priority, scheduled_at LIMIT p_limit
    )
    UPDATE stampeded_jobs j
       SET state        = 'executing',
           attempt      = j.attempt + 1,
           heartbeat_at = coalesce(p_now, now()),
           claimed_by   = p_worker_id,
           claimed_at   = coalesce(p_now, now()),
           attempted_by = array_append(
               CASE WHEN coalesce(array_length(j.attempted_by, 1), 0) >= 10
                    THEN j.attempted_by[coalesce(array_length(j.attempted_by,1),0) - 8 :]
                    ELSE j.attempted_by
               END,
               p_worker_id::text)
      FROM picked c
     WHERE j.queue = p_queue
       AND j.id    = c.id
    RETURNING j.*;
$$;

-- As in migration 2: every function runs with the search_path of the schema
-- it was installed in, the new ones included.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace = current_schema()::regnamespace
           AND p.proname LIKE 'stampeded\_%'
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, current_schema());
    END LOOP;
END $$;
