-- A failed attempt, fenced: it is recorded only while p_worker_id holds
-- attempt p_attempt of the job. The job's row is locked before it is read,
-- so that two outcomes for one attempt (the worker's timeout and the
-- expirer) cannot both decide: the second waits, re-reads the row the first
-- left behind, finds it no longer claimed, and records nothing. A job out of
-- attempts (or unrecoverable) is discarded and, when it has a
-- dead_letter_queue, copied there with its provenance; otherwise it is due
-- again after p_retry_delay_ms. The error joins the job's errors ring buffer
-- (stampeded_push_error), with when the attempt started and its worker.
-- A discarded workflow or keyed job releases the jobs waiting for it
-- (stampeded_release_waiting), and a discarded job its debounce follow-up
-- (stampeded_release_follow_ups), in the same transaction. A job that will
-- be retried keeps its place in its key's order and its follow-up: nothing
-- behind it moves.
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
       AND attempt = p_attempt
       FOR UPDATE;
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
           errors = stampeded_push_error(errors, j.attempt, p_kind, p_error, j.destination, p_exit_status, j.claimed_at, j.claimed_by),
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

    IF v_terminal AND (j.workflow_id IS NOT NULL OR j.ordering_key IS NOT NULL) THEN
        PERFORM stampeded_release_waiting('discarded', ARRAY[p_queue], ARRAY[p_id], ARRAY[j.workflow_id], ARRAY[j.ordering_key]);
    END IF;

    IF v_terminal AND j.dedup_scope IS NOT NULL THEN
        PERFORM stampeded_release_follow_ups(ARRAY[p_queue], ARRAY[p_id]);
    END IF;

    RETURN QUERY SELECT v_was, v_state, v_dlq;
END;
$$;
