-- The seed's claim, which other runtimes call, with one change: a job with
-- an ordering key (migration 11) waits for its turn as in
-- stampeded_claim_batch, so that a runtime that knows nothing of keys still
-- runs a key's jobs one at a time and in order. A job without a key is
-- claimed as the seed claims it.
CREATE OR REPLACE FUNCTION stampeded_claim(
    p_queue     text,
    p_worker_id uuid,
    p_limit     integer DEFAULT 1,

    p_now       timestamptz DEFAULT NULL
) RETURNS SETOF stampeded_jobs
LANGUAGE sql AS $$
    WITH candidate AS MATERIALIZED (
        SELECT id
          FROM stampeded_jobs
         WHERE queue        = p_queue
           -- 'retryable' is claimable once its backoff has elapsed. That can be
           -- handled by a claim predicate, a separate promotion pass, or both.
           -- The predicate is chosen here for having no moving parts -- a
           -- promotion pass is another process that can fall behind or die.
           --
           -- Omitting 'retryable' here is not a missing feature, it is a silent
           -- poison-job bug: the reaper parks a crashed job in 'retryable', a
           -- claim that only reads 'available' never picks it up again, the
           -- attempt budget never walks down, and max_attempts is never
           -- reached. Found by test, not by reading.
           AND state        IN ('available','retryable')
           AND scheduled_at <= coalesce(p_now, now())
           AND attempt      < max_attempts
           -- Its turn in its key's line (stampeded_claim_batch.sql has why
           -- these two checks keep a key's jobs one at a time and in order).
           AND (stampeded_jobs.ordering_key IS NULL OR (
                (SELECT e.ordering_position FROM stampeded_jobs e
                             WHERE e.queue = p_queue
                               AND e.ordering_key = stampeded_jobs.ordering_key
                               AND e.ordering_position < stampeded_jobs.ordering_position
                               AND e.state IN ('available','claimed','executing','retryable')
                               -- The job just ahead, read backwards from the job: its predecessor
                               -- answers at once, where the line's start holds the index entries of
                               -- its finished jobs. A scalar subquery, so that its order holds: an
                               -- EXISTS drops it, and reads the whole line where a key is hot.
                               ORDER BY e.ordering_position DESC LIMIT 1) IS NULL
                -- Nor a job of its key waiting ahead of it (migration 14).
                AND NOT EXISTS (SELECT 1 FROM stampeded_jobs w
                                 WHERE w.queue = p_queue
                                   AND w.ordering_key = stampeded_jobs.ordering_key
                                   AND w.ordering_position < stampeded_jobs.ordering_position
                                   AND w.state = 'pending'
                                   AND w.deps_pending IS NULL)
                AND NOT EXISTS (SELECT 1 FROM stampeded_jobs r
                                 WHERE r.queue = p_queue
                                   AND r.ordering_key = stampeded_jobs.ordering_key
                                   AND r.state IN ('claimed','executing'))))
         -- Must match stampeded_jobs_claim_idx EXACTLY. `id` is not a
         -- tiebreaker here: adding one reintroduces a sort unless it is also
         -- added to the index, and in the index it costs 8.5x the size by
         -- defeating btree deduplication. See the claim index note in NOTES.md.
         ORDER BY priority, scheduled_at
         LIMIT p_limit
         FOR UPDATE SKIP LOCKED
    )
    UPDATE stampeded_jobs j
       SET state        = 'executing',
           attempt      = j.attempt + 1,
           -- Seed the job heartbeat at claim so stampeded_expire has a baseline
           -- for a job that never calls stampeded_touch. Left NULL it would fall
           -- back to claimed_at, which is the same thing -- but only by accident,
           -- and the expiry predicate should not depend on that coincidence.
           heartbeat_at = coalesce(p_now, now()),
           claimed_by   = p_worker_id,
           claimed_at   = coalesce(p_now, now()),
           -- Bounded ring buffer. Unbounded attempt history is a slow leak on
           -- heavily-retried jobs; keep the last 10.
           attempted_by = array_append(
               CASE WHEN coalesce(array_length(j.attempted_by, 1), 0) >= 10
                    THEN j.attempted_by[coalesce(array_length(j.attempted_by,1),0) - 8 :]
                    ELSE j.attempted_by
               END,
               p_worker_id::text)
      FROM candidate c
     WHERE j.queue = p_queue
       AND j.id    = c.id
    RETURNING j.*;
$$;
