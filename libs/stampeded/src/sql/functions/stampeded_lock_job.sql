-- Where an operator's action on one job starts (stampeded_retry,
-- stampeded_cancel, stampeded_discard): the job, locked until the action's
-- transaction ends, found by its id and, when p_queue is given, its queue.
-- Without the queue the lookup reads every partition's primary key (README,
-- "PostgreSQL versions"). A row of NULLs when there is no such job: the
-- caller tests the id.
CREATE OR REPLACE FUNCTION stampeded_lock_job(p_id uuid, p_queue text)
RETURNS stampeded_jobs
LANGUAGE sql AS $$
    SELECT * FROM stampeded_jobs
     WHERE id = p_id AND (p_queue IS NULL OR stampeded_jobs.queue = p_queue)
       FOR UPDATE;
$$;
