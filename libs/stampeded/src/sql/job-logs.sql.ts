import { sql } from './statement.js';

/**
 * A batch of a running job's log lines (functions/stampeded_log_lines.sql):
 * $5 their times and $6 their texts, in order; $7 how many the worker
 * dropped before them; $8 how many of the job's lines to keep. Answers
 * false, and writes nothing, once the job is no longer this worker's.
 */
export const LOG_LINES = sql('stampeded_log_lines', `SELECT stampeded_log_lines($1, $2, $3, $4, $5::timestamptz[], $6::text[], $7, $8) AS owned`);

/** A job's stored log lines, oldest first (toJobLogs() reads them). */
export const JOB_LOG_LINES = sql('stampeded_job_log_lines', `SELECT seq, attempt, at, message FROM stampeded_job_logs WHERE job_id = $1::uuid ORDER BY seq`);
