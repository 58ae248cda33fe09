-- Migration 18: who last set a queue's policy, and who last closed a
-- breaker by hand, and when.
--
-- A pause records its operator (migration 7); a policy written at run time
-- (QueueControlService.setPolicy(), the dashboard's policy form) and an
-- operator's breaker reset recorded nothing, so "who raised the cap to 50"
-- had no answer. The columns sit in the rows they describe, as the pause's
-- do: the one writer of each (UPSERT_POLICY in sql/control.sql.ts, and
-- stampeded_breaker_reset in ../functions/) fills them in the same
-- statement as the change.
--
-- policy_by: the operator, 'registerQueue()' for a policy a process declared
-- at startup, or NULL for a setPolicy() call that named no one.
--
-- No index: both tables have a row per queue or destination, and their
-- updates (the planner's, every breaker failure) must stay HOT.
ALTER TABLE stampeded_queue_policies
    ADD COLUMN policy_by text,
    ADD COLUMN policy_at timestamptz;

ALTER TABLE stampeded_breakers
    ADD COLUMN closed_by text,
    ADD COLUMN closed_at timestamptz;

-- stampeded_breaker_reset takes who closed it (p_by, default NULL), so a
-- call with the destination alone, as another runtime makes it, still
-- resolves; the old signature goes for that call not to be ambiguous.
DROP FUNCTION IF EXISTS stampeded_breaker_reset(text);
