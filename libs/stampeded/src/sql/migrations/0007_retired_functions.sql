-- Migration 7: the seed's single-job claim, completion and heartbeat go.
--
-- The worker claims with stampeded_claim_batch (or stampeded_claim_fair for
-- a queue whose tenants share it), completes with stampeded_complete_many
-- and beats with one UPDATE of its row. Left installed, the seed's versions
-- were a second way in that had fallen behind: stampeded_claim honours no
-- claim cursor and keeps the generated key's per-row cost, and
-- stampeded_complete neither removes a job enqueued with removeOnComplete
-- nor takes a batch. An application calling them from SQL calls the
-- batched ones instead (CHANGELOG.md says how).
DROP FUNCTION IF EXISTS stampeded_claim(text, uuid, integer, timestamptz);
DROP FUNCTION IF EXISTS stampeded_complete(text, uuid, uuid, smallint);
DROP FUNCTION IF EXISTS stampeded_heartbeat(uuid);
