-- The worker's claim: up to p_limit due jobs of one queue, in the claim
-- index's order (priority, then due time), locked with SKIP LOCKED and moved
-- to 'claimed' by p_worker_id in one statement. The batch's rows are found
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
-- The claim sets dedup_scope to itself so that PostgreSQL computes the
-- generated dedup_key once a statement: an update that needs none of the
-- key's inputs re-reads the generated expression for every row otherwise.
-- plan_cache_mode = force_generic_plan plans the body once per connection:
-- a custom plan per call re-reads every partition's CHECK constraints.
-- NOTES.md ("Planning the hot statements") has the measurements.
--
-- Per-key ordering (migration 11, docs/ordering.md). A job with an
-- ordering_key is claimable only at its turn: (a) no unfinished job of its
-- queue and key has an earlier ordering_position (it is the head of its
-- key's line): none active (stampeded_jobs_ordering_idx) and none waiting
-- for its turn (stampeded_jobs_ordering_waiting_idx), and (b) no job of its
-- key is running. A job without a key skips the checks on its first test,
-- so the plain claim reads nothing more.
-- Why no claimer runs job 2 of a key while job 1 is unfinished:
--   * One statement judges every candidate against one snapshot, in which
--     job 1, unfinished, stands ahead of job 2: a batch takes at most one job
--     of a key, its head.
--   * Every state a job passes through before it finishes (pending while it
--     waits for its turn, available, executing, retryable) is unfinished,
--     and a finished job stays finished
--     (an operator's retry puts it back at its old place, and check (b) makes
--     it wait for the job of its key that is running). So a snapshot in which
--     job 1 is finished was taken after job 1 finished; an older snapshot sees
--     it ahead of job 2 and takes nothing of the key, or job 1 itself.
--   * Two claimers whose snapshots both make job 1 the head both try to lock
--     it: SKIP LOCKED lets one have it, and the other skips it, or, when the
--     first has committed, re-reads it as executing and leaves it.
--   * What a snapshot cannot see is a job whose enqueue commits after it.
--     Positions are drawn at enqueue, so two transactions enqueueing one key
--     at the same time may commit out of position order: a job that commits
--     behind a later job of its key that has started waits for it through
--     check (b). The one interleaving neither check sees (claimer B takes
--     job 2, claimer C, whose snapshot follows job 1's commit but precedes
--     B's, takes job 1) is refused by the unique index
--     stampeded_jobs_ordering_running_idx: C's claim waits for B's, fails
--     whole, and its worker claims again.
--   * A retry that gives up its place (stampeded_jobs.ordering_position moved
--     to the back by the worker) is one committed change: older snapshots see
--     the job ahead, retryable, and hold the line; newer ones see it behind.
-- The checks are the safety net of the order; what keeps a key's blocked
-- jobs out of the claim's way is migration 14: a keyed job enqueued behind
-- an unfinished job of its key waits in 'pending', outside the claim index,
-- until the outcome of the job ahead releases it
-- (stampeded_release_waiting.sql). A claim meets a key's head, and the few
-- jobs a race or a workflow put in the index behind it, not its whole line
-- (bench/RESULTS.md, "Per-key ordering").
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
           AND c.state        IN ('available','retryable')
           AND c.scheduled_at <= coalesce(p_now, now())
           -- The cursor: an index condition on the claim index's last
           -- column. PostgreSQL 18 skips from priority to priority in the
           -- index, so every priority is read from p_after on, in the
           -- index's order, and nothing before it is walked.
           AND c.scheduled_at >= p_after
           AND c.attempt      < c.max_attempts
           -- Its turn in its key's line (see the header).
           AND (c.ordering_key IS NULL OR (
                (SELECT e.ordering_position FROM stampeded_jobs e
                             WHERE e.queue = p_queue
                               AND e.ordering_key = c.ordering_key
                               AND e.ordering_position < c.ordering_position
                               AND e.state IN ('available','claimed','executing','retryable')
                               -- The job just ahead, read backwards from the job: its predecessor
                               -- answers at once, where the line's start holds the index entries of
                               -- its finished jobs. A scalar subquery, so that its order holds: an
                               -- EXISTS drops it, and reads the whole line where a key is hot.
                               ORDER BY e.ordering_position DESC LIMIT 1) IS NULL
                -- Nor a job of its key waiting ahead of it (migration 14).
                AND NOT EXISTS (SELECT 1 FROM stampeded_jobs w
                                 WHERE w.queue = p_queue
                                   AND w.ordering_key = c.ordering_key
                                   AND w.ordering_position < c.ordering_position
                                   AND w.state = 'pending'
                                   AND w.deps_pending IS NULL)
                AND NOT EXISTS (SELECT 1 FROM stampeded_jobs r
                                 WHERE r.queue = p_queue
                                   AND r.ordering_key = c.ordering_key
                                   AND r.state IN ('claimed','executing'))))
         -- Matches stampeded_jobs_claim_idx exactly (NOTES.md, "The claim index").
         ORDER BY c.priority, c.scheduled_at
         LIMIT p_limit
         FOR UPDATE SKIP LOCKED
    )
    UPDATE stampeded_jobs j
       SET state        = 'executing',
           attempt      = j.attempt + 1,
           heartbeat_at = coalesce(p_now, now()),
           claimed_by   = p_worker_id,
           claimed_at   = coalesce(p_now, now()),
           -- Changes nothing, and is load-bearing: see the header.
           dedup_scope  = j.dedup_scope,
           attempted_by = array_append(
               CASE WHEN coalesce(array_length(j.attempted_by, 1), 0) >= 10
                    THEN j.attempted_by[coalesce(array_length(j.attempted_by,1),0) - 8 :]
                    ELSE j.attempted_by
               END,
               p_worker_id::text)
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
