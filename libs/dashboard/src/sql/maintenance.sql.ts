import { sql } from '@stampeded/nestjs/internal';

/** One batch of the schema's pruner; it answers how many rows it deleted. */
export const PRUNE_BATCH = sql('dashboard_prune_batch', `SELECT stampeded_prune($1::interval, $2::int, $3::interval) AS deleted`);

export const PRUNE_OCCURRENCES = sql('dashboard_prune_occurrences', `SELECT stampeded_prune_occurrences($1::interval) AS deleted`);
