-- Written into each claim as {{mark_executing}} (sql/migrations/function-blocks.ts):
-- the SET list of the claim's UPDATE of stampeded_jobs j, which moves the
-- jobs it locked to 'executing' for p_worker_id at p_now (NULL: now()). The
-- claim finds the rows through the primary key (j.queue = p_queue AND j.id =
-- ANY (...)): a join to its candidates is planned as a hash join over the
-- whole partition (NOTES.md, "Batched claims and completions through the
-- primary key"). Written into the claim rather than run by a function of its
-- own that the claim calls: every claimed row then passes through one more
-- function's result, which cost the plain claim 4-8% a job (NOTES.md, "One
-- claim, three ways").
--
-- heartbeat_at is seeded at the claim so that stampeded_expire has a
-- baseline for a job that never calls stampeded_touch. attempted_by is a
-- bounded ring buffer of the last 10 workers. dedup_scope is set to itself
-- so that PostgreSQL computes the generated dedup_key once a statement: an
-- update that needs none of the key's inputs re-reads the generated
-- expression for every row otherwise (NOTES.md, "Planning the hot
-- statements").
state        = 'executing',
attempt      = j.attempt + 1,
heartbeat_at = coalesce(p_now, now()),
claimed_by   = p_worker_id,
claimed_at   = coalesce(p_now, now()),
-- Changes nothing, and is load-bearing (functions/blocks/mark_executing.sql).
dedup_scope  = j.dedup_scope,
attempted_by = array_append(
    CASE WHEN coalesce(array_length(j.attempted_by, 1), 0) >= 10
         THEN j.attempted_by[coalesce(array_length(j.attempted_by,1),0) - 8 :]
         ELSE j.attempted_by
    END,
    p_worker_id::text)
