-- Migration 14: a keyed job that is not at its turn waits outside the claim
-- index (docs/ordering.md).
--
-- A job enqueued with an ordering_key while its key has an unfinished job in
-- its queue goes in as 'pending', the state migration 13 added: outside the
-- claim index, invisible to every claim, counted by the counters. The outcome
-- of the job ahead releases it (state 'available') through
-- stampeded_release_waiting, called by every function that ends a job or
-- moves it in its line; the leader's sweep releases a head that an enqueue
-- racing that outcome left waiting. A claim no longer walks past the blocked
-- jobs of a hot key: they are not in its index.
--
-- Key-waiting and dependency-waiting are told apart by deps_pending: a job
-- that waits for workflow dependencies holds their count (> 0), a job that
-- waits for its key's turn NULL. Neither waits on the other: a job waiting
-- for dependencies is not in its key's line, so no line waits on it, and it
-- joins its line 'available' when they release it.
--
-- The waiting jobs of each key, in line order: the enqueue asks it whether a
-- key has a job waiting, the claim whether one waits ahead of its candidate
-- (an unfinished job, which stampeded_jobs_ordering_idx no longer holds), the
-- release which job is the key's next, and the sweep which keys have one.
-- Partial, so a job without a key, and every job that runs at once, has no
-- entry.
CREATE INDEX stampeded_jobs_ordering_waiting_idx
    ON stampeded_jobs (queue, ordering_key, ordering_position)
    WHERE ordering_key IS NOT NULL
      AND state = 'pending'
      AND deps_pending IS NULL;
