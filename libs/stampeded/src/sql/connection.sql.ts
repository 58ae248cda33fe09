import { sql } from './statement.js';

/**
 * Whether a session refuses writes: true on a standby (hot standby sessions
 * are read-only) and on a server whose default_transaction_read_only is on,
 * as libpq's `target_session_attrs=read-write` asks it.
 */
export const SESSION_READ_ONLY = sql('stampeded_session_read_only', `SELECT current_setting('transaction_read_only') = 'on' AS read_only`);
