-- Batched claim and completion that find their rows through the primary key,
-- whatever the planner's statistics say.
--
-- MEASURED, 50,000 no-op jobs in one queue partition, batches of 500, one
-- connection, synchronous_commit on:
--
--   seed claim + stampeded_complete_many (migration 2)   59 + 33 us a job
--   stampeded_claim_batch + this completion               34 + 12 us a job
--
-- Both old statements joined a list of ids to the partition, and the planner
-- read the whole partition to do it. The claim's UPDATE ... FROM candidate
-- estimated thousands of matches for the 500 candidates and chose a hash join
-- over a sequential scan of every row in the queue; the completion's
-- UPDATE ... FROM unnest(...) filtered the partition on claimed_by (the
-- statistics, taken while nothing was claimed, said no row has it) and then
-- compared every one of the batch's ids with every claimed row: 124,750 join
-- comparisons for 500 jobs, 23 of its 29 ms. Both grow with the table, so a
-- queue with a long backlog or many finished rows claimed and completed
-- slower the more it held. An id list given as `= ANY(array)` is an index
-- condition on (queue, id): one descent per job, however large the table.

-- The seed's stampeded_claim, returning only what a worker needs and driven
-- by the candidates' ids. Same rows, same order, same state change, same
-- attempted_by ring buffer; the seed's function stays for other callers.
-- The columns the claim itself sets (state, claimed_by, claimed_at) are not
-- returned: the caller knows them. Printing every jsonb, array and timestamp
-- of the full row as text cost up to 50 us a job more.
CREATE FUNCTION stampeded_claim_batch(
    p_queue     text,
    p_worker_id uuid,
    p_limit     integer,
    p_now       timestamptz DEFAULT NULL
) RETURNS TABLE (
    id uuid, queue text, tenant_id text, task text, args jsonb, meta jsonb, priority smallint,
    destination text, scheduled_at timestamptz, expire_seconds integer, heartbeat_at timestamptz,
    attempt smallint, max_attempts smallint, attempted_by text[], interruptions smallint,
    max_interruptions smallint, deferrals smallint, max_deferrals smallint, checkpoint jsonb,
    checkpoint_at timestamptz, checkpoint_seq integer, backoff_base_ms smallint, backoff_max_ms integer,
    dedup_scope text, dedup_period text, failure_kind text, last_error text, errors jsonb,
    dead_letter_queue text, source_id uuid, source_queue text, source_attempts smallint,
    inserted_at timestamptz
)
LANGUAGE sql AS $$
    WITH candidate AS MATERIALIZED (
        SELECT c.id
          FROM stampeded_jobs c
         WHERE c.queue        = p_queue
           AND c.state        IN ('available','retryable')
           AND c.scheduled_at <= coalesce(p_now, now())
           AND c.attempt      < c.max_attempts
         -- Matches stampeded_jobs_claim_idx exactly, as the seed's claim does.
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
           attempted_by = array_append(
               CASE WHEN coalesce(array_length(j.attempted_by, 1), 0) >= 10
                    THEN j.attempted_by[coalesce(array_length(j.attempted_by,1),0) - 8 :]
                    ELSE j.attempted_by
               END,
               p_worker_id::text)
     WHERE j.queue = p_queue
       -- The primary key, probed once per candidate; a join to the CTE was
       -- planned as a hash join over the whole partition.
       AND j.id    = ANY (ARRAY(SELECT id FROM candidate))
    RETURNING j.id, j.queue, j.tenant_id, j.task, j.args, j.meta, j.priority, j.destination,
              j.scheduled_at, j.expire_seconds, j.heartbeat_at, j.attempt, j.max_attempts,
              j.attempted_by, j.interruptions, j.max_interruptions, j.deferrals, j.max_deferrals,
              j.checkpoint, j.checkpoint_at, j.checkpoint_seq, j.backoff_base_ms, j.backoff_max_ms,
              j.dedup_scope, j.dedup_period, j.failure_kind, j.last_error, j.errors,
              j.dead_letter_queue, j.source_id, j.source_queue, j.source_attempts, j.inserted_at;
$$;

-- Same outcome and fence as migration 2's: a job completes only while this
-- worker holds the attempt it was given. The rows are found through the
-- primary key (queue = ANY, id = ANY), then matched to their attempts by a
-- hash join. No nested loop: the statistics estimate one row for "claimed by
-- this worker" (ANALYZE ran while nothing was claimed, or while other workers
-- held everything), and a nested loop over that estimate compared each of the
-- batch's rows with each of the batch's ids, 250,000 comparisons for 500 jobs
-- (measured: 103 ms on a busy machine; 10 ms with the hash join).
CREATE OR REPLACE FUNCTION stampeded_complete_many(
    p_worker_id uuid,
    p_queues    text[],
    p_ids       uuid[],
    p_attempts  smallint[]
) RETURNS TABLE (id uuid, queue text)
LANGUAGE sql
SET enable_nestloop = off
AS $$
    UPDATE stampeded_jobs j
       SET state       = 'completed',
           finished_at = now(),
           dedup_scope = NULL,
           checkpoint  = NULL,
           claimed_by  = NULL
      FROM unnest(p_queues, p_ids, p_attempts) AS o(queue, id, attempt)
     WHERE j.queue      = ANY (p_queues)
       AND j.id         = ANY (p_ids)
       AND j.queue      = o.queue
       AND j.id         = o.id
       AND j.claimed_by = p_worker_id
       AND j.attempt    = o.attempt
    RETURNING j.id, j.queue;
$$;

-- The new functions' search_path is pinned by the migration runner (see
-- PIN_SEARCH_PATH in migrations.ts), as migration 2 pinned the seed's.
