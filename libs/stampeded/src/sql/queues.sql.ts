import { sql } from './statement.js';

export const COUNTS = sql(
  'stampeded_counts',
  // Summed over the counter's slots (migration 5, contention).
  `SELECT queue, state, sum(n)::bigint AS n FROM stampeded_queue_counts
    WHERE ($1::text IS NULL OR queue = $1)
    GROUP BY queue, state HAVING sum(n) <> 0
    ORDER BY queue, state`,
);

export const CREATE_QUEUE = sql('stampeded_create_queue', `SELECT stampeded_create_queue($1, $2)`);

/** The queue a partition holds, by partition name, to refuse two queues sharing one. */
export const PARTITION_OWNER = sql('stampeded_partition_owner', `SELECT queue FROM stampeded_partition_health() WHERE partition = $1`);

export const PARTITION_NAME = sql('stampeded_partition_name', `SELECT 'stampeded_jobs_' || regexp_replace($1::text, '[^a-zA-Z0-9_]', '_', 'g') AS partition`);

/** Serialises partition provisioning within one schema ($1, the schema's name). */
export const PROVISION_LOCK = sql('stampeded_provision_lock', `SELECT pg_advisory_xact_lock(hashtextextended('stampeded.provision.' || $1, 0))`);
