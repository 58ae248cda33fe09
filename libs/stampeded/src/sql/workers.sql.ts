import { sql } from './statement.js';
import { lockHolders } from './notifications.sql.js';

export const REGISTER_WORKER = sql(
  'stampeded_register_worker',
  `INSERT INTO stampeded_workers (hostname, pid, queues, metadata) VALUES ($1, $2, $3, $4::jsonb) RETURNING id::text AS id`,
);

/**
 * Answers whether the row is still there (the reaper deletes the rows of
 * workers it declared dead), and how many connections listen to the job
 * events ($2: their lock's key, NULL when this app sends none): the worker
 * notifies them only while there are some.
 */
export const HEARTBEAT = sql(
  'stampeded_worker_heartbeat',
  `UPDATE stampeded_workers SET last_heartbeat = now() WHERE id = $1
   RETURNING id, ${lockHolders('$2')} AS event_listeners`,
);

/** A worker whose row was reaped while it lived comes back under the same id. */
export const REREGISTER_WORKER = sql(
  'stampeded_reregister_worker',
  `INSERT INTO stampeded_workers (id, hostname, pid, queues, metadata) VALUES ($1, $2, $3, $4, $5::jsonb)
   ON CONFLICT (id) DO UPDATE SET last_heartbeat = now()`,
);

export const DEREGISTER_WORKER = sql('stampeded_deregister_worker', `DELETE FROM stampeded_workers WHERE id = $1`);

/** How many jobs a worker holds (claimed or executing). */
export const OWNED_JOBS = sql(
  'stampeded_owned_jobs',
  `SELECT count(*)::int AS n FROM stampeded_jobs WHERE claimed_by = $1 AND state IN ('claimed', 'executing')`,
);

/**
 * The client session whose snapshot is oldest in this database, when a
 * queue's claims turn slow: what keeps the claim index's dead entries from
 * being removed, named for the operator.
 */
export const OLDEST_SNAPSHOT = sql(
  'stampeded_oldest_snapshot',
  `SELECT pid, coalesce(nullif(application_name, ''), 'no application_name') AS application, coalesce(state, 'unknown') AS state,
          extract(epoch FROM now() - coalesce(xact_start, backend_start))::float8 AS seconds
     FROM pg_stat_activity
    WHERE backend_xmin IS NOT NULL AND backend_type = 'client backend'
      AND datname = current_database() AND pid <> pg_backend_pid()
    ORDER BY age(backend_xmin) DESC
    LIMIT 1`,
);
