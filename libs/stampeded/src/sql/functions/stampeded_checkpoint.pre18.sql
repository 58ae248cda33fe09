-- stampeded_checkpoint for a server before PostgreSQL 18, which has no
-- RETURNING OLD: the checkpoint's size before the write is read, and the row
-- locked, by a SELECT ... FOR UPDATE ahead of the UPDATE. Same signature and
-- result as the seed's (stampeded_checkpoint.sql).
CREATE OR REPLACE FUNCTION stampeded_checkpoint(
    p_queue     text,
    p_id        uuid,
    p_worker_id uuid,
    p_attempt   smallint,
    p_state     jsonb
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    -- An eighth of the 64 KB cap: enough runway that a job growing steadily
    -- has thousands of writes left when it is told.
    c_warn_bytes constant int := 8192;
    v_seq        integer;
    v_old_size   integer;
    -- length(::text), NOT pg_column_size.
    --
    -- pg_column_size reports the STORED size, which for a stored jsonb is
    -- TOAST-compressed and for a parameter is not -- so comparing the two
    -- compares compressed against uncompressed. A stable 20 KB checkpoint of
    -- repetitive data compresses to a few hundred bytes on disk and then looks
    -- like it grew 70x on every single write, warning forever about a job
    -- doing nothing wrong. Found by testing the large-but-stable case, which
    -- is the one that distinguishes this heuristic from the size cap.
    --
    -- The text length is the logical size on both sides.
    v_new_size   integer := length(p_state::text);
BEGIN
    -- The size before, read under the row's lock: RETURNING OLD is PostgreSQL 18's.
    SELECT length(checkpoint::text) INTO v_old_size
      FROM stampeded_jobs
     WHERE queue = p_queue
       AND id    = p_id
       AND claimed_by = p_worker_id
       AND attempt = p_attempt
       AND state = 'executing'
       FOR UPDATE;

    UPDATE stampeded_jobs
       SET checkpoint     = p_state,
           checkpoint_at  = now(),
           checkpoint_seq = checkpoint_seq + 1,
           heartbeat_at   = now(),
           interruptions  = 0
     WHERE queue = p_queue
       AND id    = p_id
       AND claimed_by = p_worker_id
       AND attempt = p_attempt
       AND state = 'executing'
    RETURNING checkpoint_seq INTO v_seq;

    IF v_seq IS NOT NULL
       AND v_new_size > c_warn_bytes
       AND v_old_size IS NOT NULL
       AND v_new_size > v_old_size
    THEN
        RAISE WARNING
            'checkpoint for job % is % bytes and growing (was %); the 64 KB cap '
            'will discard this job if it continues. Store a cursor ("I have done '
            'N") rather than the set of what was done.',
            p_id, v_new_size, v_old_size;
    END IF;

    RETURN v_seq;
END;
$$;
