-- A running job's log lines (ctx.log()), as the worker writes them: in
-- batches, at most once a second per job (worker/log-reporter.ts). Fenced
-- as every write of a running job is: written only while p_worker_id holds
-- attempt p_attempt of the job and it is executing; false when it is no
-- longer ours, and nothing is written.
--
-- The job's row is read FOR SHARE, which conflicts with every update of it:
-- a cancel, a reap or an expiry that is changing the row makes this write
-- wait, then find the job no longer ours; one that comes after waits for
-- this write to commit. So no line lands after the job was taken from this
-- worker. The lock writes no new version of the claim's hot row, as an
-- UPDATE would: a log line is not a touch.
--
-- Numbers the lines after the job's last (over all its attempts), after
-- p_dropped more that the worker dropped before this batch (the handler
-- logged faster than the worker writes), then deletes every line numbered
-- p_keep or more below the last: what stays is the job's newest lines with
-- no gap (a line older than one the worker dropped goes too), and
-- max(seq) - count(*) is how many were dropped (migration 16).
CREATE OR REPLACE FUNCTION stampeded_log_lines(
    p_queue     text,
    p_id        uuid,
    p_worker_id uuid,
    p_attempt   smallint,
    p_at        timestamptz[],
    p_messages  text[],
    p_dropped   integer,
    p_keep      integer
) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_last integer;
BEGIN
    PERFORM 1 FROM stampeded_jobs
     WHERE queue = p_queue AND id = p_id
       AND claimed_by = p_worker_id AND state = 'executing'
       AND attempt = p_attempt
       FOR SHARE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    SELECT coalesce(max(l.seq), 0) + p_dropped INTO v_last FROM stampeded_job_logs l WHERE l.job_id = p_id;
    INSERT INTO stampeded_job_logs (job_id, seq, attempt, at, message)
    SELECT p_id, v_last + u.n, p_attempt, u.at, u.message
      FROM unnest(p_at, p_messages) WITH ORDINALITY AS u(at, message, n);
    v_last := v_last + cardinality(p_messages);
    DELETE FROM stampeded_job_logs l WHERE l.job_id = p_id AND l.seq <= v_last - p_keep;
    RETURN true;
END;
$$;
