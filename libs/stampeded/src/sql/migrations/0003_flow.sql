-- Migration 3: flow control. Queue policies already have their table in the
-- seed; this adds what the planner measures and the fleet's circuit breakers.
-- Their functions (stampeded_breaker_*, and stampeded_claim_fair, the claim
-- that passes over the tenants at their share) are in ../functions/.

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
