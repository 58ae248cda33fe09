-- Less work for the database per job.
--
-- MEASURED with bench/sql-cost.mjs (one connection claiming 500 jobs at a
-- time with stampeded_claim_batch and completing them with
-- stampeded_complete_many until 50,000 are done; ANALYZE and CHECKPOINT after
-- the load; WAL from pg_walinspect):
--
--   before this migration        1,357 bytes of WAL a job, 9.7 records
--     Heap/UPDATE                  555 bytes  (two new row versions)
--     Btree/INSERT_LEAF            332 bytes  (4.6 index entries)
--     Heap/LOCK                    318 bytes  (the claim's row locks, their FPIs)
--
-- A job's two updates cannot be HOT: the state column is in the claim index's
-- predicate, so each one adds an entry to the primary key and to every
-- partial index the new version satisfies. This migration removes one of
-- those entries from every claim (1.), lets a job that nobody needs to read
-- after it succeeded leave the table instead of being rewritten a second
-- time (2.), lets a claim start past what a held snapshot keeps alive (3.),
-- and takes two costs out of every claim that had nothing to do with its
-- work: a generated expression read back per row (4.) and a plan made per
-- call (5.).

-- 1. No expiry index.
--
-- stampeded_jobs_expiry_idx held (claimed_at) for executing jobs, and every
-- claim added an entry to it. Its one reader, stampeded_expire, filters on
-- coalesce(heartbeat_at, claimed_at), which the index cannot search: it read
-- the index whole as the list of executing jobs. stampeded_jobs_claimed_idx
-- is that list too (state IN ('claimed','executing')), so the expirer reads
-- that one instead (test/cost.e2e-spec.ts checks the plan). Measured: 1,357
-- -> 1,289 bytes of WAL and 5.9 -> 4.9 records a claim.
DROP INDEX stampeded_jobs_expiry_idx;

-- 2. Removal on completion.
--
-- A job enqueued with remove_on_complete is deleted by the completion that
-- would have marked it completed, as BullMQ's removeOnComplete and
-- graphile-worker's completion do: one delete record and no new row version
-- or index entry, where the update wrote the whole row again with entries in
-- the primary key and the finished index. Only success removes: a job that
-- fails, is cancelled or is discarded is kept with its errors, and its
-- dead-letter copy is made as before. The queue counters stay exact: the
-- delete is counted by the counters' DELETE trigger, so a removed job leaves
-- every count, 'completed' included. What a user gives up is in docs/enqueue.md
-- ("Removing completed jobs"): the job can no longer be read by id, and the
-- dashboard's throughput chart, which counts finished rows, does not see it.
--
-- A new column at the end of the row, where neither update changes it: the
-- updates' WAL records leave out a row's unchanged tail.
ALTER TABLE stampeded_jobs ADD COLUMN remove_on_complete boolean NOT NULL DEFAULT false;

-- The completion of migration 8, with the removal. Both statements find the
-- batch's rows through the primary key and keep the fence: a job is
-- completed, or removed, only while this worker holds the attempt it was
-- given. They see the same snapshot and touch disjoint rows.
CREATE OR REPLACE FUNCTION stampeded_complete_many(
    p_worker_id uuid,
    p_queues    text[],
    p_ids       uuid[],
    p_attempts  smallint[]
) RETURNS TABLE (id uuid, queue text)
LANGUAGE sql
SET enable_nestloop = off
-- One plan for every call (5. below).
SET plan_cache_mode = force_generic_plan
AS $$
    WITH removed AS (
        DELETE FROM stampeded_jobs j
         USING unnest(p_queues, p_ids, p_attempts) AS o(queue, id, attempt)
         WHERE j.queue      = ANY (p_queues)
           AND j.id         = ANY (p_ids)
           AND j.queue      = o.queue
           AND j.id         = o.id
           AND j.claimed_by = p_worker_id
           AND j.attempt    = o.attempt
           AND j.remove_on_complete
        RETURNING j.id, j.queue
    ),
    kept AS (
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
           AND NOT j.remove_on_complete
        RETURNING j.id, j.queue
    )
    SELECT id, queue FROM removed
    UNION ALL
    SELECT id, queue FROM kept;
$$;

-- Scheduled jobs carry the option like the others (migration 3 stored the
-- rest of a task's job options for them).
CREATE OR REPLACE FUNCTION stampeded_schedule_job(s stampeded_schedules) RETURNS uuid
LANGUAGE sql AS $$
    INSERT INTO stampeded_jobs
        (queue, task, args, meta, tenant_id, priority,
         expire_seconds, max_attempts, backoff_base_ms, backoff_max_ms,
         max_interruptions, max_deferrals, dead_letter_queue, remove_on_complete)
    VALUES
        (s.queue, s.task, s.args, s.meta, s.tenant_id, s.priority,
         coalesce((s.job_options->>'expire_seconds')::integer, 3600),
         coalesce((s.job_options->>'max_attempts')::smallint, 25),
         coalesce((s.job_options->>'backoff_base_ms')::smallint, 1000),
         coalesce((s.job_options->>'backoff_max_ms')::integer, 3600000),
         coalesce((s.job_options->>'max_interruptions')::smallint, 1),
         coalesce((s.job_options->>'max_deferrals')::smallint, 100),
         s.job_options->>'dead_letter_queue',
         coalesce((s.job_options->>'remove_on_complete')::boolean, false))
    RETURNING id;
$$;

-- 3. A claim that can start where the last one ended.
--
-- MEASURED (bench/run.mjs, scenario "snapshot"): workers at concurrency 10
-- taking a steady 4,000 no-op jobs a second while another session holds a
-- REPEATABLE READ snapshot open for 90 s. Every claimed job leaves a dead
-- entry at the head of the claim index that nothing may remove while the
-- snapshot could still see it, and every claim walked all of them again,
-- with a visit to the heap for each: insert-to-start latency p50 climbed
-- from 3.5 to 83 ms over the 90 s. Every PostgreSQL queue that claims from
-- the head of an index does this.
--
-- p_after bounds the claim below: jobs due before it are not read. A worker
-- passes it only while its claims are slow (a full claim that found the
-- queue empty took longer than a few milliseconds), and then sets it from
-- what its last claims found: a claim that took fewer jobs than it asked for
-- claimed every job visible to it, so nothing visible was left before the
-- latest due time it took. Jobs that appear before the cursor later (one
-- inserted with a past runAt, in a transaction that ran longer than the
-- cursor's margin, or given back with its old due time by the reaper) are
-- found by a full claim, which a worker runs at least once a second in this
-- mode. The default, -infinity, is the full claim.
DROP FUNCTION stampeded_claim_batch(text, uuid, integer, timestamptz);

CREATE FUNCTION stampeded_claim_batch(
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
    dedup_scope text, dedup_period text, failure_kind text, last_error text, errors jsonb,
    dead_letter_queue text, source_id uuid, source_queue text, source_attempts smallint,
    inserted_at timestamptz
)
LANGUAGE sql
-- One plan for every call (5. below).
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
           -- Changes nothing, and is load-bearing: see 4. below.
           dedup_scope  = j.dedup_scope,
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

-- 4. The claim names a column the dedup key is computed from.
--
-- MEASURED (bench/sql-cost.mjs; perf on the backend): a tenth of the
-- backend's CPU went to ExecComputeStoredGenerated -> ExecInitGenerated ->
-- stringToNode, reading the stored text of dedup_key's GENERATED
-- expression back into a tree for every row the claim updated. PostgreSQL
-- 18 keeps that work for the rest of the statement only when the statement
-- needs the generated column; an update that changes none of the key's
-- inputs does not, and so it builds it again, row after row. The claim
-- above therefore sets dedup_scope to itself: the key is then computed once
-- a statement (to the same value) and its expression is not read again per
-- row. The claim: 46-48 -> 29-33 us a job; claim plus completion 74-82 ->
-- 61-68 us of backend CPU a job; the WAL the same. (The completion and the
-- failure set dedup_scope already.)

-- 5. The worker's claim and completion are planned once.
--
-- MEASURED (bench/sql-cost.mjs with perf): PostgreSQL planned the body of
-- stampeded_claim_batch and stampeded_complete_many again on every call, a
-- custom plan for its parameters each time, and planning a statement on the
-- partitioned jobs table reads every CHECK constraint of every partition
-- back from its stored text (constraint exclusion) -- a fifth of the
-- backend's CPU in claims of ten jobs. With plan_cache_mode =
-- force_generic_plan on the two functions (their SET clauses above), the
-- plan is made once per connection and reused: claims and completions of 10
-- jobs 408 -> 309-313 us of backend CPU a job; of 500 jobs the difference
-- (70 -> 56-73 us) is inside this machine's spread. The
-- generic plans are the ones the custom plans were: the claim index from
-- p_after on, and the primary key for the batch's rows
-- (test/batched-outcomes.e2e-spec.ts reads them through auto_explain).
