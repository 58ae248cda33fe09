import { ENVELOPE_KEY } from '../encryption/envelope.js';
import { sql } from './statement.js';

/**
 * The key id of the envelope a jsonb column holds (docs/encryption.md), or
 * NULL when it holds plain JSON: as envelopeOf() reads it, an object whose
 * only key is the envelope's. For the dashboard's and the CLI's lists, which
 * say "encrypted" and with which key without reading the ciphertext out.
 * Nested CASEs, because AND does not order its operands: `-` fails on a
 * scalar result.
 */
export function sealedKeyIdSql(column: string): string {
  return `CASE WHEN jsonb_typeof(${column}) = 'object' THEN CASE WHEN ${column} - '${ENVELOPE_KEY}' = '{}'::jsonb THEN ${column} #>> '{${ENVELOPE_KEY},kid}' END END`;
}

const SEALED_IV = (column: string) => `${column} #>> '{${ENVELOPE_KEY},iv}'`;

/**
 * A page of the jobs whose args or result are sealed under another key than
 * $3, in primary-key order after ($1, $2): the rotation walks the table
 * once, however many pages it takes. Running jobs are read too, to be
 * counted; ROTATE_JOBS leaves them alone.
 */
export const ROTATION_JOBS_PAGE = sql(
  'encryption_rotation_jobs_page',
  `SELECT j.queue, j.id::text AS id, j.task, j.state, j.args, j.result
     FROM stampeded_jobs j
    WHERE (j.queue, j.id) > ($1::text, $2::uuid)
      AND (${sealedKeyIdSql('j.args')} <> $3 OR ${sealedKeyIdSql('j.result')} <> $3)
    ORDER BY j.queue, j.id
    LIMIT $4`,
);

/**
 * Writes re-sealed args and results, one batch a statement. Fenced twice: a
 * running job (claimed or executing) is not changed, since its worker holds
 * it; and a value is replaced only while it is still the envelope that was
 * read (its IV, random per sealing), so that a job re-enqueued, retried or
 * completed meanwhile keeps what it was given. Answers the jobs written.
 */
export const ROTATE_JOBS = sql(
  'encryption_rotate_jobs',
  `UPDATE stampeded_jobs j
      SET args   = coalesce(r.args, j.args),
          result = coalesce(r.result, j.result)
     FROM json_to_recordset($1::json) AS r(queue text, id uuid, args jsonb, result jsonb, args_iv text, result_iv text)
    WHERE j.queue = r.queue AND j.id = r.id
      AND j.state NOT IN ('claimed', 'executing')
      AND (r.args IS NULL OR ${SEALED_IV('j.args')} = r.args_iv)
      AND (r.result IS NULL OR ${SEALED_IV('j.result')} = r.result_iv)
   RETURNING j.id::text AS id`,
);

/** A page of the schedules whose args are sealed under another key than $2, by key after $1. */
export const ROTATION_SCHEDULES_PAGE = sql(
  'encryption_rotation_schedules_page',
  `SELECT s.key, s.task, s.args
     FROM stampeded_schedules s
    WHERE s.key > $1 AND ${sealedKeyIdSql('s.args')} <> $2
    ORDER BY s.key
    LIMIT $3`,
);

/** Writes re-sealed schedule args, each only while it is still the envelope that was read. */
export const ROTATE_SCHEDULES = sql(
  'encryption_rotate_schedules',
  `UPDATE stampeded_schedules s
      SET args = r.args
     FROM json_to_recordset($1::json) AS r(key text, args jsonb, iv text)
    WHERE s.key = r.key AND ${SEALED_IV('s.args')} = r.iv
   RETURNING s.key`,
);
