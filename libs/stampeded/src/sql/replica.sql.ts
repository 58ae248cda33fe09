import { sql } from './statement.js';

/**
 * How far behind a streaming standby is, read on the standby. The age of its
 * last replayed transaction grows while the primary is idle, so a standby
 * that has replayed all the WAL it received counts as caught up, whatever
 * that age; on a server not in recovery (a promoted standby) nothing lags.
 */
export const REPLICA_LAG = sql(
  'replica_lag',
  `SELECT pg_is_in_recovery() AS standby,
          pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() AS replayed_all,
          extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 AS replay_age`,
);

/** Where the primary's WAL ends now: a standby that has replayed up to it shows every write committed before. */
export const PRIMARY_WAL_END = sql('primary_wal_end', `SELECT pg_current_wal_lsn()::text AS lsn`);

/** Whether the standby has replayed the primary's WAL up to a position; true on a server not in recovery. */
export const REPLAYED_UP_TO = sql('replayed_up_to', `SELECT NOT pg_is_in_recovery() OR coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false) AS replayed`);
