-- Migration 7: a queue's pause is columns of its policy row.
--
-- An operator's pause was the verdict 'hold' with a reason starting
-- "paused by <who>[: <why>]", and every reader parsed that text. The pause is
-- the operator's and the verdict the planner's: the pause now has columns of
-- its own, which workers obey however old the verdict is, and the planner
-- reads to decide a paused queue's verdict (control/queue-planner.ts).
-- PAUSE_QUEUE and RESUME_QUEUE in sql/control.sql.ts are the one writer; the
-- service, the dashboard and the CLI all use them.
--
-- No index: the table has a row per queue with a policy, and the planner's
-- updates to it must stay HOT.
ALTER TABLE stampeded_queue_policies
    ADD COLUMN paused       boolean     NOT NULL DEFAULT false,
    ADD COLUMN paused_by    text,
    ADD COLUMN pause_reason text,
    ADD COLUMN paused_at    timestamptz;

-- A pause written the old way becomes one: the verdict 'hold' with the
-- reason "paused by <who>" or "paused by <who>: <why>", split at the first
-- ": " (the dashboard's operator names have none). The verdict and its
-- reason stay as they were: the planner keeps a paused queue held.
UPDATE stampeded_queue_policies p
   SET paused       = true,
       paused_by    = coalesce(nullif(split_part(o.pause, ': ', 1), ''), 'an operator'),
       pause_reason = nullif(substr(o.pause, length(split_part(o.pause, ': ', 1)) + 3), ''),
       paused_at    = coalesce(p.decided_at, p.updated_at)
  FROM (SELECT queue, substr(reason, length('paused by ') + 1) AS pause
          FROM stampeded_queue_policies
         WHERE verdict = 'hold' AND left(reason, length('paused by ')) = 'paused by ') o
 WHERE p.queue = o.queue;

-- Who and since when go with a pause, and nothing is left of one once the
-- queue is resumed.
ALTER TABLE stampeded_queue_policies
    ADD CONSTRAINT stampeded_queue_policies_pause_check CHECK (
        CASE WHEN paused THEN paused_by IS NOT NULL AND paused_at IS NOT NULL
             ELSE num_nulls(paused_by, pause_reason, paused_at) = 3 END);
