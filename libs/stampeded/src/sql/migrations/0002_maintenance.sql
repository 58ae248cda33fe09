-- Migration 2: what the maintenance leader and the scheduler need beyond the
-- seed. Their functions (stampeded_reap, stampeded_fail, the schedule
-- functions, stampeded_repair_partition) are in ../functions/.

-- stampeded_claim_due_schedules takes the instant to claim at (a test clock
-- moves time). The seed's one-argument version is dropped rather than
-- overloaded: an overload with a defaulted second argument makes every
-- one-argument call ambiguous.
DROP FUNCTION IF EXISTS stampeded_claim_due_schedules(integer);

-- Scheduled jobs carry their task's job options.
--
-- The seed's stampeded_fire_schedule inserted queue, task, args, meta, tenant
-- and priority, and left everything else to the column defaults: a task
-- declared with maxAttempts 3, a 60-second expiry and a dead-letter queue got
-- 25 attempts, an hour and no dead letter whenever its schedule fired it,
-- while the same task enqueued by hand got what it declared. The runtime that
-- upserts a schedule resolves the options as an enqueue would and stores them
-- here; a schedule written without them gets the column defaults, as before.
ALTER TABLE stampeded_schedules
    ADD COLUMN job_options jsonb NOT NULL DEFAULT '{}'::jsonb,
    ADD CONSTRAINT stampeded_schedules_job_options_object CHECK (jsonb_typeof(job_options) = 'object');
