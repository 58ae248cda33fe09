-- The worker's claim: up to p_limit due jobs of one queue, in the claim
-- index's order (priority, then due time), locked with SKIP LOCKED and moved
-- to 'executing' for p_worker_id in one statement. The batch's rows are found
-- through the primary key (`= ANY(array)`), one descent a job, so the claim
-- costs the same however many rows the queue holds.
--
-- p_after bounds the claim below: jobs due before it are not read. A worker
-- passes it only while its claims are slow (worker/claim-cursor.ts): a long
-- snapshot keeps the dead entries of every claimed job at the head of the
-- claim index, and every claim from the head walks them all again. Jobs that
-- appear before the cursor later (a past runAt committed late, or a job given
-- back by the reaper with its old due time) are found by a full claim, which
-- the worker runs beside the cursor's claims once a second in that mode, or
-- less often when full claims take over a tenth of that. The default,
-- -infinity, is the full claim.
--
-- plan_cache_mode = force_generic_plan plans the body once per connection:
-- a custom plan per call re-reads every partition's CHECK constraints.
-- NOTES.md ("Planning the hot statements") has the measurements.
--
-- What every claim shares is written once, in functions/blocks/ (sql/
-- migrations/function-blocks.ts puts it in place at install): the turn of a
-- job with an ordering key (ordering_turn.sql) and the update that moves the
-- claimed rows to 'executing' (mark_executing.sql).
CREATE OR REPLACE FUNCTION stampeded_claim_batch(
    p_queue     text,
    p_worker_id uuid,
    p_limit     integer,
    p_now       timestamptz DEFAULT NULL,
    p_after     timestamptz DEFAULT '-infinity'
) RETURNS TABLE (
    id uuid, queue text, tenant_id text, task text, args jsonb, meta jsonb, priority smallint,
    destination text, scheduled_at timestamptz, expire_seconds integer, heartbeat_at timestamptz,
    attempt smallint, max_attempts smallint, attempted_by text[], interruptions smallint,
    max_interruptions smallint, deferrals smallint, max_deferrals smallint, checkpoint jsonb,
    checkpoint_at timestamptz, checkpoint_seq integer, backoff_base_ms smallint, backoff_max_ms integer,
    backoff_base_wide_ms integer, dedup_scope text, dedup_period text, failure_kind text, last_error text, errors jsonb,
    dead_letter_queue text, source_id uuid, source_queue text, source_attempts smallint,
    inserted_at timestamptz, ordering_key text
)
LANGUAGE sql
-- One plan for every call (see the header).
SET plan_cache_mode = force_generic_plan
AS $$
    WITH candidate AS MATERIALIZED (
        SELECT c.id
          FROM stampeded_jobs c
         WHERE c.queue        = p_queue
           -- 'retryable' too, once its backoff has elapsed: the reaper parks a
           -- crashed job there, and a claim that read only 'available' would
           -- never run it again (the seed's note in its stampeded_claim).
           AND c.state        IN ('available','retryable')
           AND c.scheduled_at <= coalesce(p_now, now())
           -- The cursor: an index condition on the claim index's last
           -- column. PostgreSQL 18 skips from priority to priority in the
           -- index, so every priority is read from p_after on, in the
           -- index's order, and nothing before it is walked.
           AND c.scheduled_at >= p_after
           AND c.attempt      < c.max_attempts
           -- Its turn in its key's order (blocks/ordering_turn.sql).
           AND {{ordering_turn}}
         -- Matches stampeded_jobs_claim_idx exactly (NOTES.md, "The claim index").
         ORDER BY c.priority, c.scheduled_at
         LIMIT p_limit
         FOR UPDATE SKIP LOCKED
    )
    UPDATE stampeded_jobs j
       SET {{mark_executing}}
     WHERE j.queue = p_queue
       -- The primary key, probed once per candidate; a join to the CTE is
       -- planned as a hash join over the whole partition.
       AND j.id    = ANY (ARRAY(SELECT id FROM candidate))
    RETURNING j.id, j.queue, j.tenant_id, j.task, j.args, j.meta, j.priority, j.destination,
              j.scheduled_at, j.expire_seconds, j.heartbeat_at, j.attempt, j.max_attempts,
              j.attempted_by, j.interruptions, j.max_interruptions, j.deferrals, j.max_deferrals,
              j.checkpoint, j.checkpoint_at, j.checkpoint_seq, j.backoff_base_ms, j.backoff_max_ms,
              j.backoff_base_wide_ms, j.dedup_scope, j.dedup_period, j.failure_kind, j.last_error, j.errors,
              j.dead_letter_queue, j.source_id, j.source_queue, j.source_attempts, j.inserted_at,
              j.ordering_key;
$$;
