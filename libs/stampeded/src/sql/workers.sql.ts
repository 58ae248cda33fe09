import { sql } from './statement.js';

export const REGISTER_WORKER = sql(
  'stampeded_register_worker',
  `INSERT INTO stampeded_workers (hostname, pid, queues, metadata) VALUES ($1, $2, $3, $4::jsonb) RETURNING id::text AS id`,
);

export const HEARTBEAT = sql('stampeded_heartbeat', `SELECT stampeded_heartbeat($1)`);

export const DEREGISTER_WORKER = sql('stampeded_deregister_worker', `DELETE FROM stampeded_workers WHERE id = $1`);
