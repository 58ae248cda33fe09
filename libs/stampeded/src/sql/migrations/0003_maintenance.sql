-- Migration 3: what the maintenance leader and the scheduler need beyond the seed.

-- The reaper ends a job the way stampeded_fail ends it.
--
-- The seed's reaper discarded a job whose interruption budget was spent but
-- never wrote its dead letter: a job that killed its worker twice vanished
-- from its dead_letter_queue, while the same job failing by a raise arrived
-- there with its provenance. Every terminal path now ends the same way: the
-- provenance copy (source_id, source_queue, source_attempts, max_attempts; its
-- own dead_letter_queue NULL, so that a dead letter cannot loop), and an entry
-- in the errors ring buffer, so that "why did this run twice" is answered in
-- the job's own history and not only in last_error.
--
-- Also reaped: a job claimed by a worker whose row is gone altogether. The
-- reaper finds orphans through their worker's stale heartbeat, so a job whose
-- worker row was deleted (by an operator, or by a worker that kept running
-- after its row was reaped) had no stale heartbeat to be found by and stayed
-- 'executing' forever. Such a job is reaped once its own last sign of life is
-- as old as a dead worker's.
CREATE OR REPLACE FUNCTION stampeded_reap(
    p_dead_after interval DEFAULT interval '5 minutes'
) RETURNS TABLE (id uuid, queue text, worker_id uuid)
LANGUAGE sql AS $$
    WITH dead AS MATERIALIZED (
        SELECT w.id FROM stampeded_workers w
         WHERE w.last_heartbeat < now() - p_dead_after
        UNION
        SELECT DISTINCT o.claimed_by FROM stampeded_jobs o
         WHERE o.state IN ('claimed','executing')
           AND o.claimed_by IS NOT NULL
           AND coalesce(o.heartbeat_at, o.claimed_at) < now() - p_dead_after
           AND NOT EXISTS (SELECT 1 FROM stampeded_workers w WHERE w.id = o.claimed_by)
    ),
    reaped AS (
        UPDATE stampeded_jobs j
           -- The same two budgets as the seed: `attempt` was spent at claim
           -- (the poison brake), `interruptions` is the brake for jobs that
           -- kill their worker. A job at its last attempt is discarded here
           -- rather than parked: stampeded_claim never takes a job whose
           -- attempt has reached max_attempts, so 'retryable' would be forever.
           SET state        = CASE WHEN j.interruptions + 1 > j.max_interruptions
                                     OR j.attempt >= j.max_attempts
                                   THEN 'discarded' ELSE 'retryable' END,
               failure_kind  = 'worker_missing',
               interruptions = j.interruptions + 1,
               last_error    = 'worker stopped heartbeating; job reclaimed',
               error_fingerprint = stampeded_fingerprint('worker stopped heartbeating; job reclaimed'),
               errors = (
                   SELECT coalesce(jsonb_agg(e), '[]'::jsonb) FROM (
                       SELECT e FROM jsonb_array_elements(
                           j.errors || jsonb_build_object(
                               'at',          now(),
                               'attempt',     j.attempt,
                               'kind',        'worker_missing',
                               'message',     'worker stopped heartbeating; job reclaimed',
                               'destination', j.destination,
                               'exit_status', NULL
                           )
                       ) e OFFSET greatest(jsonb_array_length(j.errors) + 1 - 10, 0)
                   ) t
               ),
               claimed_by   = NULL,
               claimed_at   = NULL,
               heartbeat_at = NULL,
               finished_at  = CASE WHEN j.interruptions + 1 > j.max_interruptions
                                     OR j.attempt >= j.max_attempts THEN now() END,
               dedup_scope  = CASE WHEN j.interruptions + 1 > j.max_interruptions
                                     OR j.attempt >= j.max_attempts
                                   THEN NULL ELSE j.dedup_scope END
          FROM dead d
         WHERE j.claimed_by = d.id
           AND j.state IN ('claimed','executing')
        RETURNING j.id, j.queue, d.id AS worker_id, j.state, j.task, j.args, j.meta, j.tenant_id,
                  j.priority, j.destination, j.dead_letter_queue, j.attempt, j.max_attempts
    ),
    -- Unreferenced, and still run: PostgreSQL executes every data-modifying
    -- CTE to completion whether or not the outer query reads it.
    lettered AS (
        INSERT INTO stampeded_jobs
            (queue, task, args, meta, tenant_id, priority, destination,
             source_id, source_queue, source_attempts, max_attempts)
        SELECT r.dead_letter_queue, r.task, r.args, r.meta, r.tenant_id, r.priority, r.destination,
               r.id, r.queue, r.attempt, r.max_attempts
          FROM reaped r
         WHERE r.state = 'discarded' AND r.dead_letter_queue IS NOT NULL
        RETURNING 1
    )
    SELECT r.id, r.queue, r.worker_id FROM reaped r;
$$;

-- stampeded_fail, with the reaper's attempt brake for interruptions.
--
-- The seed decided an interruption (heartbeat_lost, worker_exited,
-- worker_missing) by the interruption budget alone. A job on its LAST attempt
-- whose isolated child process died then went back to 'retryable' with
-- attempt = max_attempts, which stampeded_claim never takes: it sat there,
-- neither run nor finished nor pruned nor dead-lettered. The reaper already
-- checked both budgets; this makes the two paths agree. Otherwise unchanged.
CREATE OR REPLACE FUNCTION stampeded_fail(
    p_queue        text,
    p_id           uuid,
    p_worker_id    uuid,
    p_attempt      smallint,
    p_kind         text,
    p_error        text,
    p_retry_delay_ms bigint DEFAULT NULL,
    p_exit_status  integer DEFAULT NULL
) RETURNS TABLE (was text, now_state text, dead_lettered boolean)
LANGUAGE plpgsql AS $$
DECLARE
    j            stampeded_jobs%ROWTYPE;
    v_was        text;
    v_state      text;
    v_interrupt  boolean;
    v_refund     boolean;
    v_terminal   boolean;
    v_dlq        boolean := false;
BEGIN
    SELECT * INTO j FROM stampeded_jobs
     WHERE queue = p_queue AND id = p_id AND claimed_by = p_worker_id
       AND attempt = p_attempt;
    IF NOT FOUND THEN
        RETURN;
    END IF;

    v_was := j.state;
    v_interrupt := p_kind IN ('heartbeat_lost', 'worker_exited', 'worker_missing');
    v_refund    := p_kind IN ('breaker_open', 'throttled');

    v_terminal := CASE
        WHEN v_refund    THEN j.deferrals + 1 > j.max_deferrals
        WHEN p_kind = 'unrecoverable' THEN true
        WHEN v_interrupt THEN j.interruptions + 1 > j.max_interruptions
                              OR j.attempt >= j.max_attempts
        ELSE j.attempt >= j.max_attempts
    END;

    v_state := CASE WHEN v_terminal THEN 'discarded' ELSE 'retryable' END;

    UPDATE stampeded_jobs
       SET state        = v_state,
           failure_kind = p_kind,
           attempt      = CASE WHEN v_refund THEN greatest(attempt - 1, 0) ELSE attempt END,
           interruptions = CASE WHEN v_interrupt THEN interruptions + 1 ELSE interruptions END,
           deferrals    = CASE WHEN v_refund THEN deferrals + 1 ELSE deferrals END,
           last_error   = left(p_error, 4000),
           error_fingerprint = stampeded_fingerprint(p_error),
           errors = (
               SELECT coalesce(jsonb_agg(e), '[]'::jsonb) FROM (
                   SELECT e FROM jsonb_array_elements(
                       errors || jsonb_build_object(
                           'at',          now(),
                           'attempt',     j.attempt,
                           'kind',        p_kind,
                           'message',     left(p_error, 1000),
                           'destination', j.destination,
                           'exit_status', p_exit_status
                       )
                   ) e OFFSET greatest(jsonb_array_length(errors) + 1 - 10, 0)
               ) t
           ),
           scheduled_at = CASE
                            WHEN p_retry_delay_ms IS NULL THEN scheduled_at
                            ELSE now() + make_interval(secs => p_retry_delay_ms / 1000.0)
                          END,
           claimed_by   = NULL,
           claimed_at   = NULL,
           heartbeat_at = NULL,
           dedup_scope  = CASE WHEN v_terminal THEN NULL ELSE dedup_scope END,
           finished_at  = CASE WHEN v_terminal THEN now() ELSE NULL END
     WHERE queue = p_queue AND id = p_id AND claimed_by = p_worker_id
       AND attempt = p_attempt;

    IF v_terminal AND j.dead_letter_queue IS NOT NULL THEN
        INSERT INTO stampeded_jobs
            (queue, task, args, meta, tenant_id, priority, destination,
             source_id, source_queue, source_attempts, max_attempts)
        VALUES
            (j.dead_letter_queue, j.task, j.args, j.meta, j.tenant_id, j.priority, j.destination,
             j.id, j.queue, j.attempt, j.max_attempts);
        v_dlq := true;
    END IF;

    RETURN QUERY SELECT v_was, v_state, v_dlq;
END;
$$;

-- Due schedules as of a given instant, so that a test clock can move time.
--
-- NULL means the server's now(): every process of a fleet then reads one
-- clock, the database's, and a process whose own clock runs ahead cannot
-- claim an occurrence early. (A late one still fires once: the occurrence
-- ledger's unique token is the backstop.) Replaced rather than overloaded,
-- because an overload with a defaulted second argument makes every
-- one-argument call ambiguous.
DROP FUNCTION stampeded_claim_due_schedules(integer);
CREATE FUNCTION stampeded_claim_due_schedules(
    p_limit integer DEFAULT 100,
    p_now   timestamptz DEFAULT NULL
) RETURNS SETOF stampeded_schedules
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
        SELECT * FROM stampeded_schedules
         WHERE NOT paused AND next_run_at <= coalesce(p_now, now())
         ORDER BY next_run_at
         LIMIT p_limit
         FOR UPDATE SKIP LOCKED;
END;
$$;

-- Scheduled jobs carry their task's job options.
--
-- The seed's stampeded_fire_schedule inserted queue, task, args, meta, tenant
-- and priority, and left everything else to the column defaults: a task
-- declared with maxAttempts 3, a 60-second expiry and a dead-letter queue got
-- 25 attempts, an hour and no dead letter whenever its schedule fired it,
-- while the same task enqueued by hand got what it declared. The runtime that
-- upserts a schedule resolves the options as an enqueue would and stores them
-- here; a schedule written without them gets the column defaults, as before.
ALTER TABLE stampeded_schedules
    ADD COLUMN job_options jsonb NOT NULL DEFAULT '{}'::jsonb,
    ADD CONSTRAINT stampeded_schedules_job_options_object CHECK (jsonb_typeof(job_options) = 'object');

-- One job for one schedule, with its options: shared by the firing and by
-- "fire now", so that the two cannot drift apart. The fallbacks are the
-- stampeded_jobs column defaults.
CREATE FUNCTION stampeded_schedule_job(s stampeded_schedules) RETURNS uuid
LANGUAGE sql AS $$
    INSERT INTO stampeded_jobs
        (queue, task, args, meta, tenant_id, priority,
         expire_seconds, max_attempts, backoff_base_ms, backoff_max_ms,
         max_interruptions, max_deferrals, dead_letter_queue)
    VALUES
        (s.queue, s.task, s.args, s.meta, s.tenant_id, s.priority,
         coalesce((s.job_options->>'expire_seconds')::integer, 3600),
         coalesce((s.job_options->>'max_attempts')::smallint, 25),
         coalesce((s.job_options->>'backoff_base_ms')::smallint, 1000),
         coalesce((s.job_options->>'backoff_max_ms')::integer, 3600000),
         coalesce((s.job_options->>'max_interruptions')::smallint, 1),
         coalesce((s.job_options->>'max_deferrals')::smallint, 100),
         s.job_options->>'dead_letter_queue')
    RETURNING id;
$$;

-- The seed's firing, unchanged but for the insert: the occurrence ledger
-- first (a token already there means another process fired it, and only
-- next_run_at moves), then the job with its options.
CREATE OR REPLACE FUNCTION stampeded_fire_schedule(p_key text, p_next_run_at timestamptz)
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    s        stampeded_schedules%ROWTYPE;
    v_token  text;
    v_job    uuid;
    -- Separate from v_job: the ledger's id is bigserial, the job's is uuid.
    v_occ    bigint;
BEGIN
    SELECT * INTO s FROM stampeded_schedules WHERE key = p_key;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;

    v_token := CASE s.dst_policy
        WHEN 'wall_clock' THEN
            to_char(s.next_run_at AT TIME ZONE s.timezone, 'YYYY-MM-DD HH24:MI')
        ELSE
            extract(epoch FROM s.next_run_at)::bigint::text
    END;

    INSERT INTO stampeded_cron_occurrences (cron_key, occurrence_token)
    VALUES (s.key, v_token)
    ON CONFLICT (cron_key, occurrence_token) DO NOTHING
    RETURNING id INTO v_occ;

    IF v_occ IS NULL THEN
        UPDATE stampeded_schedules
           SET next_run_at = p_next_run_at, updated_at = now()
         WHERE key = s.key;
        RETURN NULL;
    END IF;

    v_job := stampeded_schedule_job(s);

    UPDATE stampeded_cron_occurrences
       SET job_id = v_job
     WHERE id = v_occ;

    UPDATE stampeded_schedules
       SET next_run_at = p_next_run_at, last_run_at = now(), updated_at = now()
     WHERE key = s.key;

    RETURN v_job;
END;
$$;

-- Gives a partition back the triggers it should have, and its counts.
--
-- stampeded_partition_health() finds a partition without its notify or
-- counter triggers (one attached by hand, or restored from a dump taken with
-- --section=pre-data); this repairs it. Only the missing triggers are created,
-- so a half-repaired partition (some counter triggers present) does not fail
-- on the ones it has. While the counter triggers were missing the partition's
-- rows went uncounted, so its queues are recounted afterwards: a repaired
-- trigger with a stale base would count from the wrong number forever.
CREATE FUNCTION stampeded_repair_partition(p_partition text)
RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    v_rel      regclass := to_regclass(format('%I', p_partition));
    v_repaired text[] := '{}';
    v_queue    text;
BEGIN
    IF v_rel IS NULL THEN
        RETURN v_repaired;
    END IF;

    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = v_rel AND tgname = 'stampeded_notify_insert_trg') THEN
        EXECUTE format(
            'CREATE TRIGGER stampeded_notify_insert_trg AFTER INSERT ON %I'
            '  REFERENCING NEW TABLE AS inserted'
            '  FOR EACH STATEMENT EXECUTE FUNCTION stampeded_notify_insert()', p_partition);
        v_repaired := v_repaired || 'stampeded_notify_insert_trg'::text;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = v_rel AND tgname = 'stampeded_count_ins_trg') THEN
        EXECUTE format(
            'CREATE TRIGGER stampeded_count_ins_trg AFTER INSERT ON %I'
            '  REFERENCING NEW TABLE AS added'
            '  FOR EACH STATEMENT EXECUTE FUNCTION stampeded_count_delta()', p_partition);
        v_repaired := v_repaired || 'stampeded_count_ins_trg'::text;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = v_rel AND tgname = 'stampeded_count_upd_trg') THEN
        EXECUTE format(
            'CREATE TRIGGER stampeded_count_upd_trg AFTER UPDATE ON %I'
            '  REFERENCING NEW TABLE AS added OLD TABLE AS removed'
            '  FOR EACH STATEMENT EXECUTE FUNCTION stampeded_count_delta()', p_partition);
        v_repaired := v_repaired || 'stampeded_count_upd_trg'::text;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = v_rel AND tgname = 'stampeded_count_del_trg') THEN
        EXECUTE format(
            'CREATE TRIGGER stampeded_count_del_trg AFTER DELETE ON %I'
            '  REFERENCING OLD TABLE AS removed'
            '  FOR EACH STATEMENT EXECUTE FUNCTION stampeded_count_delta()', p_partition);
        v_repaired := v_repaired || 'stampeded_count_del_trg'::text;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = v_rel AND tgname = 'stampeded_count_trunc_trg') THEN
        EXECUTE format(
            'CREATE TRIGGER stampeded_count_trunc_trg AFTER TRUNCATE ON %I'
            '  FOR EACH STATEMENT EXECUTE FUNCTION stampeded_count_truncate()', p_partition);
        v_repaired := v_repaired || 'stampeded_count_trunc_trg'::text;
    END IF;

    IF cardinality(v_repaired) > 0 THEN
        FOR v_queue IN EXECUTE format('SELECT DISTINCT queue FROM %I', p_partition) LOOP
            PERFORM stampeded_recount_queue(v_queue);
        END LOOP;
    END IF;
    RETURN v_repaired;
END;
$$;

-- The same pin as migration 2, for every function this migration created or
-- replaced: CREATE OR REPLACE resets a function's SET clauses.
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
