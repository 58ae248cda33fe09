import { quoteIdent, sql } from './statement.js';

// The maintenance leader's statements. Durations travel as milliseconds and
// become intervals here, so a caller never formats an interval string.

/**
 * One leader per schema: a session advisory lock, held for as long as the
 * leader's dedicated connection lives. The key is derived from the schema so
 * that two installs in one database elect two leaders.
 */
export const TRY_LEADER_LOCK = sql(
  'maintenance_try_leader_lock',
  `SELECT pg_try_advisory_lock(hashtextextended('stampeded.maintenance.' || $1::text, 0)) AS acquired`,
);

export const RELEASE_LEADER_LOCK = sql(
  'maintenance_release_leader_lock',
  `SELECT pg_advisory_unlock(hashtextextended('stampeded.maintenance.' || $1::text, 0)) AS released`,
);

/**
 * The leader's lease, where no session outlives a transaction (a
 * transaction-mode pooler): the row of migration 12. Taken only once expired,
 * with the next term; renewed only by the holder of the current term and
 * while it has not expired; given up by setting it expired. Each is one
 * statement, so each is one transaction through the pooler.
 */
export const TAKE_LEASE = sql(
  'maintenance_take_lease',
  `INSERT INTO stampeded_leader_leases AS l (name, holder, term, expires_at)
   VALUES ($1, $2, 1, now() + make_interval(secs => $3::float8 / 1000))
   ON CONFLICT (name) DO UPDATE
      SET holder = excluded.holder, term = l.term + 1, acquired_at = now(), renewed_at = now(), expires_at = excluded.expires_at
    WHERE l.expires_at <= now()
   RETURNING term::text AS term`,
);

export const RENEW_LEASE = sql(
  'maintenance_renew_lease',
  `UPDATE stampeded_leader_leases
      SET renewed_at = now(), expires_at = now() + make_interval(secs => $4::float8 / 1000)
    WHERE name = $1 AND holder = $2 AND term = $3::bigint AND expires_at > now()
   RETURNING term::text AS term`,
);

export const GIVE_UP_LEASE = sql(
  'maintenance_give_up_lease',
  `UPDATE stampeded_leader_leases SET expires_at = now() WHERE name = $1 AND holder = $2 AND term = $3::bigint AND expires_at > now()`,
);

/** The leader's proof of life: a session lock lives exactly as long as the session answers. */
export const LEADER_PING = sql('maintenance_leader_ping', `SELECT 1 AS alive`);

export const REAP = sql(
  'maintenance_reap',
  `SELECT id::text AS id, queue, worker_id::text AS worker_id FROM stampeded_reap(make_interval(secs => $1::float8 / 1000))`,
);

/**
 * A dead worker's row goes once it owns nothing: deleted while it still owned
 * a job, the job would have no stale heartbeat left to be found by.
 */
export const DELETE_DEAD_WORKERS = sql(
  'maintenance_delete_dead_workers',
  `DELETE FROM stampeded_workers w
    WHERE w.last_heartbeat < now() - make_interval(secs => $1::float8 / 1000)
      AND NOT EXISTS (SELECT 1 FROM stampeded_jobs j
                       WHERE j.claimed_by = w.id AND j.state IN ('claimed', 'executing'))
   RETURNING w.id::text AS id`,
);

export const EXPIRE = sql('maintenance_expire', `SELECT out_id::text AS id, out_queue AS queue, out_worker::text AS worker_id FROM stampeded_expire($1)`);

/**
 * The ordering sweep (OrderingSweeper): of the keys with a job waiting for its
 * turn (migration 14), read through the waiting index one key a descent, $3
 * at most after ($1, $2) (NULLs: from the first), those whose first waiting
 * job has no active job ahead of it, released by stampeded_release_waiting,
 * which decides again under the keys' locks. Answers how many keys it read,
 * how many jobs it released, and the last key read, where the next batch
 * starts.
 */
export const SWEEP_ORDERING = sql(
  'maintenance_sweep_ordering',
  `
WITH RECURSIVE keys AS (
    (SELECT w.queue, w.ordering_key, 1 AS n
       FROM stampeded_jobs w
      WHERE w.ordering_key IS NOT NULL AND w.state = 'pending' AND w.deps_pending IS NULL
        AND (w.queue, w.ordering_key) > (coalesce($1::text, ''), coalesce($2::text, ''))
      ORDER BY w.queue, w.ordering_key
      LIMIT 1)
    UNION ALL
    SELECT nx.queue, nx.ordering_key, k.n + 1
      FROM keys k
     CROSS JOIN LATERAL (
           SELECT w.queue, w.ordering_key
             FROM stampeded_jobs w
            WHERE w.ordering_key IS NOT NULL AND w.state = 'pending' AND w.deps_pending IS NULL
              AND (w.queue, w.ordering_key) > (k.queue, k.ordering_key)
            ORDER BY w.queue, w.ordering_key
            LIMIT 1) nx
     WHERE k.n < $3::int
),
stuck AS (
    SELECT k.queue, k.ordering_key
      FROM keys k
     CROSS JOIN LATERAL (
           SELECT w.ordering_position
             FROM stampeded_jobs w
            WHERE w.queue = k.queue AND w.ordering_key = k.ordering_key
              AND w.state = 'pending' AND w.deps_pending IS NULL
            ORDER BY w.ordering_position
            LIMIT 1) h
     WHERE (SELECT e.ordering_position FROM stampeded_jobs e
             WHERE e.queue = k.queue AND e.ordering_key = k.ordering_key
               AND e.ordering_position < h.ordering_position
               AND e.state IN ('available','claimed','executing','retryable')
             ORDER BY e.ordering_position DESC LIMIT 1) IS NULL
)
SELECT (SELECT count(*) FROM keys)::int AS keys,
       coalesce((SELECT stampeded_release_waiting(NULL, array_agg(s.queue), NULL, NULL, array_agg(s.ordering_key))
                   FROM stuck s HAVING count(*) > 0), 0)::int AS released,
       l.queue AS last_queue, l.ordering_key AS last_key
  FROM (SELECT 1) one
  LEFT JOIN (SELECT k.queue, k.ordering_key FROM keys k ORDER BY k.n DESC LIMIT 1) l ON true`,
);

/**
 * One batch of the pruner. While the insights rollup is on ($4), both
 * retentions are stretched back to its watermark, so that no finished job is
 * deleted before the rollup has read it: until its first run, none is.
 */
export const PRUNE = sql(
  'maintenance_prune',
  `SELECT stampeded_prune(greatest(make_interval(secs => $1::float8 / 1000), h.behind), $2,
                          greatest(make_interval(secs => $3::float8 / 1000), h.behind)) AS deleted
     FROM (SELECT CASE WHEN $4::boolean
                       THEN coalesce(now() - (SELECT w.finished_at FROM stampeded_insights_watermark w WHERE w.name = 'rollup'), interval '1000 years')
                       ELSE interval '0' END AS behind) h`,
);

/**
 * One batch of the insights rollup (stampeded_rollup_insights.sql): $1 the
 * settle time in ms, $2 the batch size, $3 and $4 the histogram
 * (INSIGHTS_HISTOGRAM), $5 how many tenants and destinations are kept per
 * hour, queue and task.
 */
export const ROLLUP_INSIGHTS = sql(
  'maintenance_rollup_insights',
  `SELECT jobs, through, more FROM stampeded_rollup_insights(make_interval(secs => $1::float8 / 1000), $2, $3, $4, $5)`,
);

/** The rollup's rows past their retention: minutes after $1 ms, hours and keys after $2 ms. */
export const INSIGHTS_RETENTION = sql(
  'maintenance_insights_retention',
  `WITH minutes AS (
       DELETE FROM stampeded_insights WHERE grain = 'minute' AND bucket < now() - make_interval(secs => $1::float8 / 1000) RETURNING 1
   ), hours AS (
       DELETE FROM stampeded_insights WHERE grain = 'hour' AND bucket < now() - make_interval(secs => $2::float8 / 1000) RETURNING 1
   ), keys AS (
       DELETE FROM stampeded_insight_keys WHERE bucket < now() - make_interval(secs => $2::float8 / 1000) RETURNING 1
   )
   SELECT (SELECT count(*) FROM minutes)::int + (SELECT count(*) FROM hours)::int + (SELECT count(*) FROM keys)::int AS deleted`,
);

/** The seed's function deletes at most 10,000 rows a call. */
export const PRUNE_OCCURRENCES_BATCH = 10_000;
export const PRUNE_OCCURRENCES = sql(
  'maintenance_prune_occurrences',
  `SELECT stampeded_prune_occurrences(make_interval(secs => $1::float8 / 1000)) AS deleted`,
);

export const PARTITION_HEALTH = sql('maintenance_partition_health', `SELECT partition, queue, has_notify, has_counts FROM stampeded_partition_health()`);

export const REPAIR_PARTITION = sql('maintenance_repair_partition', `SELECT stampeded_repair_partition($1) AS repaired`);

export const RECOUNT_QUEUE = sql('maintenance_recount_queue', `SELECT stampeded_recount_queue($1)`);

/**
 * The schema's vacuum health, with what the vacuum rule (VacuumWatch) also
 * reads: whether autovacuum is on for each table (the server's autovacuum
 * and track_counts, and the table's own autovacuum_enabled), its last
 * vacuum by hand, and autovacuum_naptime.
 */
export const VACUUM_HEALTH = sql(
  'maintenance_vacuum_health',
  `SELECT h.relname, h.live_tuples::float8 AS live_tuples, h.dead_tuples::float8 AS dead_tuples, h.dead_ratio,
          h.autovac_threshold, h.needs_vacuum, h.last_autovacuum, s.last_vacuum,
          current_setting('autovacuum')::boolean AND current_setting('track_counts')::boolean
            AND coalesce((SELECT o.option_value::boolean FROM pg_options_to_table(c.reloptions) o
                           WHERE o.option_name = 'autovacuum_enabled'), true) AS autovacuum_enabled,
          extract(epoch FROM current_setting('autovacuum_naptime')::interval)::float8 AS naptime_secs
     FROM stampeded_vacuum_health() h
     JOIN pg_class c ON c.relname = h.relname AND c.relnamespace = current_schema()::regnamespace
     LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid`,
);

export const INDEX_DENSITY = sql(
  'maintenance_index_density',
  `SELECT indexname, pages::float8 AS pages, entries::float8 AS entries, per_page, sparse FROM stampeded_index_density()`,
);

/**
 * Not a prepared statement: REINDEX takes no parameters, and CONCURRENTLY
 * cannot run inside a transaction block, which an implicit one from the
 * extended protocol is not -- but a name must still be spliced in.
 */
export function reindexConcurrently(schema: string, index: string): string {
  return `REINDEX INDEX CONCURRENTLY ${quoteIdent(schema)}.${quoteIdent(index)}`;
}
