-- stampeded_claim_batch for a queue whose tenants compete for this worker's
-- slots: up to p_per_tenant jobs of each tenant in p_tenants (those with work
-- and with room in this worker), each tenant's in its own claim order, read
-- through the tenant index. Taking the head of the queue instead and
-- filtering it cannot work: behind a 10,000-job flood the head is all flood,
-- and the small tenants wait for the whole flood. Jobs without a tenant are
-- claimed alongside, as one more tenant. A job with an ordering key waits
-- for its turn, and the claimed rows are updated, as every claim does it
-- (functions/blocks/).
CREATE OR REPLACE FUNCTION stampeded_claim_fair(
    p_queue        text,
    p_worker_id    uuid,
    p_limit        integer,
    p_now          timestamptz,
    p_tenants      text[],
    p_per_tenant   integer
) RETURNS SETOF stampeded_jobs
LANGUAGE sql AS $$
    WITH candidate AS MATERIALIZED (
        SELECT k.id, k.priority, k.scheduled_at
          -- The states as a column of the tenants' rows, not constants: the
          -- claim index's predicate (state IN ('available','retryable')) is
          -- then not provable, and only the tenant index can serve the read.
          -- With the constants, a queue without statistics yet (a burst into
          -- a new or just-emptied queue, as when a flood arrives) was read
          -- through the claim index for each tenant: 2 ms a tenant behind
          -- 2,000 jobs, 0.03 ms through the tenant index.
          FROM (SELECT u.tenant_id, '{available,retryable}'::text[] AS states FROM unnest(p_tenants) AS u(tenant_id) OFFSET 0) AS t
         CROSS JOIN LATERAL (
               SELECT id, priority, scheduled_at FROM stampeded_jobs c
                WHERE queue        = p_queue
                  AND tenant_id    = t.tenant_id
                  AND state        = ANY (t.states)
                  AND scheduled_at <= coalesce(p_now, now())
                  AND attempt      < max_attempts
                  -- Its turn in its key's order (blocks/ordering_turn.sql).
                  AND {{ordering_turn}}
                -- priority + 0: an order the claim index cannot give, so
                -- that each tenant's jobs are read through the tenant index
                -- and sorted. In the claim index's order, with a LIMIT, the
                -- planner walks the queue's head and filters by tenant: each
                -- small tenant behind a flood read the whole flood (38 ms a
                -- claim for ten tenants behind 2,000 jobs; 2.5 ms now).
                ORDER BY priority + 0, scheduled_at
                LIMIT p_per_tenant
                FOR UPDATE SKIP LOCKED) k
        UNION ALL
        SELECT id, priority, scheduled_at FROM (
               SELECT id, priority, scheduled_at FROM stampeded_jobs c
                WHERE queue        = p_queue
                  AND tenant_id    IS NULL
                  AND state        IN ('available','retryable')
                  AND scheduled_at <= coalesce(p_now, now())
                  AND attempt      < max_attempts
                  AND {{ordering_turn}}
                ORDER BY priority, scheduled_at
                LIMIT p_per_tenant
                FOR UPDATE SKIP LOCKED) n
    ),
    picked AS (
        SELECT id FROM candidate ORDER BY priority, scheduled_at LIMIT p_limit
    )
    UPDATE stampeded_jobs j
       SET {{mark_executing}}
     WHERE j.queue = p_queue
       AND j.id    = ANY (ARRAY(SELECT id FROM picked))
    RETURNING j.*;
$$;
