-- Migration 12: the maintenance leader's lease, for transaction-mode poolers.
--
-- The leader is elected by a session advisory lock held on a connection of
-- its own (maintenance/leader-election.ts): it lives exactly as long as the
-- session. Behind a transaction-mode pooler (PgBouncer's pool_mode =
-- transaction) there is no session to hold it on: a lock taken in one
-- transaction stays with a server connection that the next transaction of
-- the same client may not get, and another client may. There the leader holds
-- this row instead (maintenance/leader-lease.ts): taken when it has expired,
-- renewed every leader check while it lasts, given up at a clean stop.
--
--   name        what is led; one row per kind ('maintenance')
--   holder      the process that holds it (a random id per process)
--   term        counts the hand-overs: a renewal names the term it holds, so
--               a leader that stalled past its expiry and lost the row to
--               another renews nothing and steps down (fencing by term)
--   expires_at  when followers may take it over: the leader check interval
--               times three after the last renewal, by the database's clock
--
-- One row a name, updated HOT (no index on the columns that change).
CREATE TABLE stampeded_leader_leases (
    name        text        PRIMARY KEY,
    holder      text        NOT NULL,
    term        bigint      NOT NULL CHECK (term > 0),
    acquired_at timestamptz NOT NULL DEFAULT now(),
    renewed_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
