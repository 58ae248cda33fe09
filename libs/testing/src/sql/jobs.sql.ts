import { sql } from '@stampeded/nestjs/internal';

/** The jobs expectEnqueued() matches: a task, a queue and an args subset, each optional. */
export const MATCHING_JOBS = sql(
  'stampeded_testing_matching_jobs',
  `SELECT * FROM stampeded_jobs
    WHERE state = ANY($1) AND ($2::text IS NULL OR task = $2) AND ($3::text IS NULL OR queue = $3)
      AND ($4::jsonb IS NULL OR args @> $4::jsonb)
    ORDER BY id`,
);

/** What is enqueued instead, for the message of a failed expectation. */
export const ENQUEUED_SAMPLE = sql(
  'stampeded_testing_enqueued_sample',
  `SELECT queue, task, state, args FROM stampeded_jobs WHERE state = ANY($1) ORDER BY id LIMIT 20`,
);
