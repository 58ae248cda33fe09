-- The job a schedule fires, with the job options the schedule stored
-- (job_options, keyed by the jobs table's columns: the runtime stores its
-- tasks' settings there, JOB_COLUMNS in queue/job-columns.ts).
--
-- A column the schedule did not store, or stored as null -- a schedule
-- written before its option existed, or by another runtime -- is left out of
-- the insert and takes the table's DEFAULT, as the runtime's own enqueue
-- reads it (queue/job-column-defaults.ts): the schema is the one home of the
-- defaults, and a new option needs no edit here. The insert is built for the
-- columns stored, so it is planned at each firing; a schedule fires rarely.
--
-- A schedule with an ordering key (job_options.ordering_key) fires its jobs
-- into that key's order: the job's place is its id, drawn by the insert, and
-- it waits in 'pending' when its key has an unfinished job, as an enqueued
-- one does (docs/ordering.md). The key and the state are set by an update
-- of the row just inserted, made only for such a schedule.
CREATE OR REPLACE FUNCTION stampeded_schedule_job(s stampeded_schedules) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_key     text := s.job_options->>'ordering_key';
    v_columns text;
    v_id      uuid;
BEGIN
    -- The stored options that name a column of the jobs table, but not one
    -- the schedule fills from its own columns, nor the key (below).
    SELECT coalesce(string_agg(format(', %I', a.attname), '' ORDER BY a.attnum), '')
      INTO v_columns
      FROM pg_attribute a
     WHERE a.attrelid = 'stampeded_jobs'::regclass
       AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
       AND a.attname NOT IN ('queue', 'task', 'args', 'meta', 'tenant_id', 'priority', 'ordering_key')
       AND s.job_options->>a.attname IS NOT NULL;

    EXECUTE format(
        'INSERT INTO stampeded_jobs (queue, task, args, meta, tenant_id, priority%s)
         SELECT $1, $2, $3, $4, $5, $6%s FROM jsonb_populate_record(NULL::stampeded_jobs, $7) o
         RETURNING id',
        v_columns, replace(v_columns, ', ', ', o.'))
       USING s.queue, s.task, s.args, s.meta, s.tenant_id, s.priority, s.job_options
        INTO v_id;

    IF v_key IS NOT NULL THEN
        UPDATE stampeded_jobs j
           SET ordering_key      = v_key,
               ordering_position = v_id,
               state = CASE WHEN EXISTS (SELECT 1 FROM stampeded_jobs u
                                          WHERE u.queue = s.queue AND u.ordering_key = v_key
                                            AND u.state = 'pending' AND u.deps_pending IS NULL)
                              OR EXISTS (SELECT 1 FROM stampeded_jobs u
                                          WHERE u.queue = s.queue AND u.ordering_key = v_key
                                            AND u.state IN ('available','claimed','executing','retryable'))
                            THEN 'pending' ELSE 'available' END
         WHERE j.queue = s.queue AND j.id = v_id;
    END IF;

    RETURN v_id;
END;
$$;
