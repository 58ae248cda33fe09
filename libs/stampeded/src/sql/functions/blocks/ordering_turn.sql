-- Written into each claim as {{ordering_turn}} (sql/migrations/function-blocks.ts):
-- the condition on a candidate `c` of queue p_queue that it is at its turn in
-- its key's order (per-key ordering, migration 11, docs/ordering.md). A job
-- with an ordering_key is claimable only at its turn: (a) no unfinished job
-- of its queue and key has an earlier ordering_position (it is the head of
-- its key's order): none active (stampeded_jobs_ordering_idx) and none
-- waiting for its turn (stampeded_jobs_ordering_waiting_idx), and (b) no job
-- of its key is running. A job without a key skips the checks on its first
-- test, so a claim of jobs without keys reads nothing more. Written into the
-- claim rather than called as a function of its own: a call per keyed
-- candidate cost a claim of keyed jobs a quarter more (NOTES.md, "One claim,
-- three ways").
--
-- Why no claimer runs job 2 of a key while job 1 is unfinished:
--   * One statement judges every candidate against one snapshot, in which
--     job 1, unfinished, stands ahead of job 2: a batch takes at most one job
--     of a key, its head.
--   * Every state a job passes through before it finishes (pending while it
--     waits for its turn, available, executing, retryable) is unfinished,
--     and a finished job stays finished
--     (an operator's retry puts it back at its old place, and check (b) makes
--     it wait for the job of its key that is running). So a snapshot in which
--     job 1 is finished was taken after job 1 finished; an older snapshot sees
--     it ahead of job 2 and takes nothing of the key, or job 1 itself.
--   * Two claimers whose snapshots both make job 1 the head both try to lock
--     it: SKIP LOCKED lets one have it, and the other skips it, or, when the
--     first has committed, re-reads it as executing and leaves it.
--   * What a snapshot cannot see is a job whose enqueue commits after it.
--     Positions are drawn at enqueue, so two transactions enqueueing one key
--     at the same time may commit out of position order: a job that commits
--     behind a later job of its key that has started waits for it through
--     check (b). The one interleaving neither check sees (claimer B takes
--     job 2, claimer C, whose snapshot follows job 1's commit but precedes
--     B's, takes job 1) is refused by the unique index
--     stampeded_jobs_ordering_running_idx: C's claim waits for B's, fails
--     whole, and its worker claims again.
--   * A retry that gives up its place (stampeded_jobs.ordering_position moved
--     to the back by the worker) is one committed change: older snapshots see
--     the job ahead, retryable, and hold the order; newer ones see it behind.
-- The checks are the safety net of the order; what keeps a key's blocked
-- jobs out of the claim's way is migration 14: a keyed job enqueued behind
-- an unfinished job of its key waits in 'pending', outside the claim index,
-- until the outcome of the job ahead releases it
-- (stampeded_release_waiting.sql). A claim meets a key's head, and the few
-- jobs a race or a workflow put in the index behind it, not its whole order
-- (bench/RESULTS.md, "Per-key ordering").
(c.ordering_key IS NULL OR (
     (SELECT e.ordering_position FROM stampeded_jobs e
       WHERE e.queue = p_queue
         AND e.ordering_key = c.ordering_key
         AND e.ordering_position < c.ordering_position
         AND e.state IN ('available','claimed','executing','retryable')
         -- The job just ahead, read backwards from the job: its predecessor
         -- answers at once, where the key's first entries are those of its
         -- finished jobs. A scalar subquery, so that its order holds: an
         -- EXISTS drops it, and reads the key's whole order where a key is hot.
       ORDER BY e.ordering_position DESC LIMIT 1) IS NULL
     -- Nor a job of its key waiting ahead of it (migration 14).
     AND NOT EXISTS (SELECT 1 FROM stampeded_jobs w
                      WHERE w.queue = p_queue
                        AND w.ordering_key = c.ordering_key
                        AND w.ordering_position < c.ordering_position
                        AND w.state = 'pending'
                        AND w.deps_pending IS NULL)
     AND NOT EXISTS (SELECT 1 FROM stampeded_jobs r
                      WHERE r.queue = p_queue
                        AND r.ordering_key = c.ordering_key
                        AND r.state IN ('claimed','executing'))))
