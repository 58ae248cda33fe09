-- Migration 10: rate limits. One row per limited key ('queue:<name>',
-- 'task:<name>', 'tenant:<id>', 'destination:<name>'), shared by the whole
-- fleet: the starts of the key's jobs in its last period, as a log of
-- (claim time, jobs claimed) pairs, one pair a claim statement. The limited
-- claim (stampeded_claim_limited, in ../functions/) locks the rows of the
-- keys it is about to claim for, counts the log inside the window, takes no
-- more than the room left, and appends its own pair: a sliding window,
-- exact to the claim, across every process. Pairs older than the window
-- (plus a margin for claims that waited on the lock) are dropped as the log
-- is written.
--
-- full_until: while the window is full, when its oldest pair leaves it. The
-- limited claim passes over the jobs of a full key without reading its log,
-- so a flood of one tenant at its limit does not hide the other tenants'
-- jobs behind it.
--
-- The limits themselves are the worker's options (control.rateLimits), not
-- rows: every process that claims the key applies the limit it was given.
--
-- No index beyond the key: the rows are rewritten by every limited claim,
-- and the updates must stay HOT.
CREATE TABLE stampeded_rate_limits (
    key         text        PRIMARY KEY,
    started_at  timestamptz[] NOT NULL DEFAULT '{}',
    started     integer[]   NOT NULL DEFAULT '{}',
    full_until  timestamptz,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT stampeded_rate_limits_log_pairs CHECK (cardinality(started_at) = cardinality(started))
);

-- max_running is held by the same claim: it counts the queue's claimed and
-- executing jobs under a lock of the queue's own and takes no more than the
-- room left, so the cap is exact for every process that claims the queue
-- that way. The seed's comment on the column (soft, read through the
-- verdict) stays true of a claim that reads only the verdict, as another
-- runtime's may.
