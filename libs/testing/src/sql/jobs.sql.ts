import { sealedKeyIdSql, sql } from '@stampeded/nestjs/internal';

/**
 * The jobs expectEnqueued() matches: a task, a queue and an args subset, each
 * optional. A job whose args are stored encrypted comes back whatever the
 * subset, for the app to open and compare (OPENED_ARGS_CONTAIN).
 */
export const MATCHING_JOBS = sql(
  'stampeded_testing_matching_jobs',
  `SELECT * FROM stampeded_jobs
    WHERE state = ANY($1) AND ($2::text IS NULL OR task = $2) AND ($3::text IS NULL OR queue = $3)
      AND ($4::jsonb IS NULL OR args @> $4::jsonb OR ${sealedKeyIdSql('args')} IS NOT NULL)
    ORDER BY id`,
);

/**
 * Which of the opened args ($1, in order) hold $2: the args match of
 * MATCHING_JOBS for the jobs whose args are stored encrypted, which the
 * database can only compare once the app has opened them. The same jsonb
 * containment, so that a sealed job matches as a plain one would.
 */
export const OPENED_ARGS_CONTAIN = sql(
  'stampeded_testing_opened_args_contain',
  `SELECT (u.ord - 1)::int AS index FROM unnest($1::jsonb[]) WITH ORDINALITY AS u(args, ord) WHERE u.args @> $2::jsonb`,
);

/** What is enqueued instead, for the message of a failed expectation. */
export const ENQUEUED_SAMPLE = sql(
  'stampeded_testing_enqueued_sample',
  `SELECT queue, task, state, args FROM stampeded_jobs WHERE state = ANY($1) ORDER BY id LIMIT 20`,
);
