-- The claim of a queue under a limit: its max_running (the policy row) and
-- the rate limits of its jobs (p_rules), held for the whole fleet. A queue
-- with neither is claimed by stampeded_claim_batch alone, and pays nothing
-- for this.
--
-- max_running: claims of a capped queue take a transaction lock of the
-- queue's own, count its claimed and executing jobs, and take no more than
-- the room left; the next claim waits for this one's commit and counts what
-- it took. The cap is exact across processes: no two claims share the same
-- free slot. Jobs are then claimed as stampeded_claim_batch (or, while
-- tenants compete, stampeded_claim_fair) would, so a capped queue keeps the
-- claim order and whatever else the plain claim does.
--
-- Rate limits: p_rules maps a kind ('queue', 'task', 'tenant',
-- 'destination') to values, each to {"limit": n, "ms": period}; the value
-- '*' applies to every value not named, each with a window of its own. A job
-- is claimed only while every key it falls under ('task:send', 'tenant:acme',
-- ...) has fewer than `limit` starts in the `ms` before the claim time
-- (stampeded_rate_limits: a sliding window, exact to the claim). The keys'
-- rows are locked in key order, so two claims never take the same room and
-- never deadlock. A job whose key is full is not claimed at all: it spends
-- no attempt and no deferral, and it stays where it is in the claim order.
--
-- Full keys are looked up by the keys the candidates carry, through the
-- table's primary key, never by reading every key's row: with a window per
-- tenant or per destination ('*') the table holds a row per tenant ever
-- limited, and a claim reads only its own few. The candidates are read in
-- claim order; when some carry a full key, they are read again without that
-- key's jobs (a few rounds at most: a job of a full key that is still read
-- is not taken, as its key has no room).
--
-- A claim held back by a full window returns one more row, with a NULL job
-- and held_ms, the time until the first full window its candidates met
-- frees a start: the worker claims again then, rather than at its next poll.
--
-- A job with an ordering key waits for its turn, and the claimed rows are
-- updated, as every claim does it (functions/blocks/).
CREATE OR REPLACE FUNCTION stampeded_claim_limited(
    p_queue      text,
    p_worker_id  uuid,
    p_limit      integer,
    p_now        timestamptz,
    p_rules      jsonb,
    p_tenants    text[],
    p_per_tenant integer
) RETURNS TABLE (job stampeded_jobs, held_ms integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_room    integer := p_limit;
    v_cap     integer;
    v_now     timestamptz;
    v_ids     uuid[];
    v_full    text[] := '{}';
    v_held    timestamptz;
    v_found   text[];
    v_until   timestamptz;
    v_round   integer := 0;
    c_ids     uuid[];
    c_keys    text[];   -- per candidate, its keys with a rule, as 'k1|k2|...'
    v_keys    text[];
    v_limits  integer[];
    v_ms      float8[];
    v_left    integer[];
    v_took    integer[];
    v_take    uuid[] := '{}';
    v_job_keys text[];
    v_ok      boolean;
    v_pos     integer;
    k         text;
    i         integer;
    r         record;
BEGIN
    IF p_limit IS NULL OR p_limit <= 0 THEN
        RETURN;
    END IF;

    SELECT pol.max_running INTO v_cap FROM stampeded_queue_policies pol WHERE pol.queue = p_queue;
    IF v_cap IS NOT NULL THEN
        -- Every statement below reads a snapshot taken after the lock: the
        -- claims that held it before are counted.
        PERFORM pg_advisory_xact_lock(hashtextextended('stampeded.max_running.' || p_queue, 0));
        SELECT least(v_room, v_cap - count(*)::int) INTO v_room
          FROM stampeded_jobs j
         WHERE j.queue = p_queue AND j.state IN ('claimed', 'executing');
        IF v_room <= 0 THEN
            RETURN;
        END IF;
    END IF;

    IF p_rules IS NULL THEN
        IF p_tenants IS NULL THEN
            v_ids := ARRAY(SELECT b.id FROM stampeded_claim_batch(p_queue, p_worker_id, v_room, p_now) b);
        ELSE
            v_ids := ARRAY(SELECT f.id FROM stampeded_claim_fair(p_queue, p_worker_id, v_room, p_now, p_tenants, p_per_tenant) f);
        END IF;
        RETURN QUERY SELECT j, NULL::integer FROM stampeded_jobs j WHERE j.queue = p_queue AND j.id = ANY (v_ids);
        RETURN;
    END IF;

    -- The candidates' clock, read after the cap's lock; the windows' is read
    -- again once the keys are locked, below.
    v_now := coalesce(p_now, clock_timestamp());
    SELECT rl.full_until INTO v_held
      FROM stampeded_rate_limits rl WHERE rl.key = 'queue:' || p_queue AND rl.full_until > v_now;
    IF v_held IS NOT NULL THEN
        RETURN QUERY SELECT NULL::stampeded_jobs, ceil(extract(epoch FROM v_held - v_now) * 1000)::integer;
        RETURN;
    END IF;

    LOOP
    -- Candidates: a few times the room, in claim order, leaving out the jobs
    -- of the full keys found so far, each with the keys it falls under that
    -- have a rule.
    WITH candidate AS MATERIALIZED (
        SELECT c.id, c.priority, c.scheduled_at, c.task, c.tenant_id, c.destination
          FROM stampeded_jobs c
         WHERE c.queue        = p_queue
           AND c.state        IN ('available', 'retryable')
           AND c.scheduled_at <= v_now
           AND c.attempt      < c.max_attempts
           AND NOT (('task:' || c.task) = ANY (v_full))
           AND (c.tenant_id IS NULL OR NOT (('tenant:' || c.tenant_id) = ANY (v_full)))
           AND (c.destination IS NULL OR NOT (('destination:' || c.destination) = ANY (v_full)))
           -- Its turn in its key's order (blocks/ordering_turn.sql).
           AND {{ordering_turn}}
         ORDER BY c.priority, c.scheduled_at
         LIMIT least(greatest(v_room * 4, 20), 1000)
         FOR UPDATE SKIP LOCKED
    ),
    keyed AS (
        SELECT c.id, c.priority, c.scheduled_at,
               (SELECT coalesce(string_agg(kv.kind || ':' || kv.val, '|' ORDER BY kv.kind), '')
                  FROM (VALUES ('destination', c.destination), ('queue', p_queue), ('task', c.task), ('tenant', c.tenant_id)) AS kv(kind, val)
                 WHERE kv.val IS NOT NULL
                   AND coalesce(p_rules -> kv.kind -> kv.val, p_rules -> kv.kind -> '*') IS NOT NULL) AS keys
          FROM candidate c
    )
    SELECT array_agg(keyed.id ORDER BY keyed.priority, keyed.scheduled_at, keyed.id),
           array_agg(keyed.keys ORDER BY keyed.priority, keyed.scheduled_at, keyed.id)
      INTO c_ids, c_keys
      FROM keyed;
    IF c_ids IS NULL THEN
        -- Every due job is under a full key: claim again when the first frees.
        IF v_held IS NOT NULL THEN
            RETURN QUERY SELECT NULL::stampeded_jobs, greatest(1, ceil(extract(epoch FROM v_held - v_now) * 1000))::integer;
        END IF;
        RETURN;
    END IF;

    v_keys := ARRAY(SELECT DISTINCT u.key FROM unnest(c_keys) AS ck(keys), unnest(string_to_array(ck.keys, '|')) AS u(key)
                     WHERE u.key <> '' ORDER BY 1);
    -- The candidates' full keys, by primary key.
    SELECT array_agg(rl.key), min(rl.full_until) INTO v_found, v_until
      FROM stampeded_rate_limits rl
     WHERE rl.key = ANY (v_keys) AND rl.full_until > v_now AND NOT (rl.key = ANY (v_full));
    EXIT WHEN v_found IS NULL;
    v_full := v_full || v_found;
    v_held := least(v_held, v_until);
    v_round := v_round + 1;
    EXIT WHEN v_round >= 4;
    END LOOP;
    -- Every key's row exists before any is locked; both in key order.
    INSERT INTO stampeded_rate_limits (key) SELECT u.key FROM unnest(v_keys) AS u(key) ORDER BY 1 ON CONFLICT (key) DO NOTHING;
    PERFORM 1 FROM stampeded_rate_limits rl WHERE rl.key = ANY (v_keys) ORDER BY rl.key FOR UPDATE;
    -- The windows' clock, read once the keys are this claim's: the claims of
    -- a key log their times in the order they counted, and the time a claim
    -- waited for another's locks is not in the grace its jobs have to start
    -- in (START_GRACE, control/control.config.ts), which the worker counts
    -- from this time (CLAIM_LIMITED returns how far into the statement it is).
    IF p_now IS NULL THEN
        v_now := clock_timestamp();
    END IF;
    v_limits := array_fill(0, ARRAY[cardinality(v_keys)]);
    v_ms     := array_fill(0::float8, ARRAY[cardinality(v_keys)]);
    v_left   := array_fill(0, ARRAY[cardinality(v_keys)]);
    v_took   := array_fill(0, ARRAY[cardinality(v_keys)]);
    FOR r IN
        SELECT rl.key, rl.started_at, rl.started,
               coalesce(p_rules -> split_part(rl.key, ':', 1) -> substr(rl.key, strpos(rl.key, ':') + 1),
                        p_rules -> split_part(rl.key, ':', 1) -> '*') AS rule
          FROM stampeded_rate_limits rl
         WHERE rl.key = ANY (v_keys)
         ORDER BY rl.key
           FOR UPDATE
    LOOP
        v_pos := array_position(v_keys, r.key);
        v_limits[v_pos] := (r.rule ->> 'limit')::integer;
        v_ms[v_pos] := (r.rule ->> 'ms')::float8;
        v_left[v_pos] := v_limits[v_pos] - coalesce((
            SELECT sum(l.n) FROM unnest(r.started_at, r.started) AS l(at, n)
             WHERE l.at > v_now - make_interval(secs => v_ms[v_pos] / 1000)), 0)::integer;
    END LOOP;

    -- In claim order, each job whose keys all have room, up to the room.
    FOR i IN 1 .. cardinality(c_ids) LOOP
        EXIT WHEN cardinality(v_take) >= v_room;
        v_job_keys := string_to_array(c_keys[i], '|');
        v_ok := true;
        FOREACH k IN ARRAY v_job_keys LOOP
            IF k <> '' AND v_left[array_position(v_keys, k)] <= 0 THEN
                v_ok := false;
            END IF;
        END LOOP;
        IF v_ok THEN
            v_take := v_take || c_ids[i];
            FOREACH k IN ARRAY v_job_keys LOOP
                IF k <> '' THEN
                    v_pos := array_position(v_keys, k);
                    v_left[v_pos] := v_left[v_pos] - 1;
                    v_took[v_pos] := v_took[v_pos] + 1;
                END IF;
            END LOOP;
        ELSE
            v_held := coalesce(v_held, v_now + interval '1 second');
        END IF;
    END LOOP;

    -- Each key's log: this claim's starts appended, pairs out of the window
    -- (and a margin for a claim that read its clock before waiting on a
    -- lock) dropped; full_until set while the window is full.
    UPDATE stampeded_rate_limits rl
       SET (started_at, started) = (
               SELECT coalesce(array_agg(l.at ORDER BY l.at), '{}'), coalesce(array_agg(l.n ORDER BY l.at), '{}')
                 FROM (SELECT x.at, x.n FROM unnest(rl.started_at, rl.started) AS x(at, n)
                        WHERE x.at > v_now - make_interval(secs => t.ms / 1000 + 5)
                       UNION ALL
                       SELECT v_now, t.took WHERE t.took > 0) l),
           full_until = CASE WHEN t.left_ > 0 THEN NULL ELSE (
               SELECT min(l.at) + make_interval(secs => t.ms / 1000)
                 FROM (SELECT x.at FROM unnest(rl.started_at) AS x(at)
                        WHERE x.at > v_now - make_interval(secs => t.ms / 1000)
                       UNION ALL
                       SELECT v_now WHERE t.took > 0) l) END,
           updated_at = v_now
      FROM unnest(v_keys, v_took, v_left, v_ms) AS t(key, took, left_, ms)
     WHERE rl.key = t.key
       AND (t.took > 0 OR (t.left_ <= 0 AND (rl.full_until IS NULL OR rl.full_until <= v_now)));
    -- A key this claim filled holds the next claim until it frees; a claim
    -- that took its whole room is not held.
    SELECT least(v_held, min(rl.full_until)) INTO v_held
      FROM stampeded_rate_limits rl WHERE rl.key = ANY (v_keys) AND rl.full_until > v_now;
    IF cardinality(v_take) >= v_room THEN
        v_held := NULL;
    END IF;

    -- The claimed rows' clock (blocks/mark_executing.sql reads p_now): the windows'.
    p_now := v_now;
    RETURN QUERY
    WITH claimed AS (
        UPDATE stampeded_jobs j
           SET {{mark_executing}}
         WHERE j.queue = p_queue
           AND j.id    = ANY (v_take)
        RETURNING j
    )
    SELECT claimed.j, NULL::integer FROM claimed
    UNION ALL
    SELECT NULL::stampeded_jobs, greatest(1, ceil(extract(epoch FROM v_held - v_now) * 1000))::integer WHERE v_held IS NOT NULL;
END;
$$;
