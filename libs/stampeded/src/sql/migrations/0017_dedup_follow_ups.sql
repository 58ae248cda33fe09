-- Migration 17: a debounced request that finds its scope's job running
-- waits behind it as one follow-up job (docs/enqueue.md, "Debounce").
--
-- The dedup index (the seed's stampeded_jobs_dedup_idx) holds a scope from
-- the insert of its job until that job finishes, and a running job is never
-- changed. A request of dedup mode replace or extend that arrives meanwhile
-- is inserted as the scope's FOLLOW-UP: a job in state 'pending' (outside
-- the claim index, as migration 13 added it), outside the dedup index, that
-- the outcome which ends the running job releases in its own transaction
-- (functions/stampeded_release_follow_ups.sql): it then takes the scope and
-- becomes 'available'. Later requests replace the follow-up's args as they
-- would a waiting job's. So a scope has at most one runnable job and at most
-- one follow-up, and the newest request is never dropped.
--
-- TWO COLUMNS, at the end of the row, NULL on every job but a follow-up:
--   dedup_follows       the id of the job of its scope it waits behind (in
--                       the same queue: the dedup index is per queue).
--   dedup_follow_scope  the scope it takes when released, as dedup_scope
--                       stores it; its dedup_period is set as for any job,
--                       and its inserted_at falls in the period of the job it
--                       follows (the request matched that job's key).
--
-- At most one follow-up per job, held by the database: two requests racing
-- to insert one conflict here, and the loser replaces the winner's args.
-- Partial, so a job that is not a follow-up has no entry, and the outcome
-- functions' lookup of a finished job's follow-up reads an index that is
-- empty unless follow-ups wait (bench/RESULTS.md, "Debounce follow-ups").
ALTER TABLE stampeded_jobs
    ADD COLUMN dedup_follows      uuid,
    ADD COLUMN dedup_follow_scope text;

CREATE UNIQUE INDEX stampeded_jobs_dedup_follows_idx
    ON stampeded_jobs (queue, dedup_follows)
    WHERE dedup_follows IS NOT NULL;
