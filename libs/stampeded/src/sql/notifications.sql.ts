import { quoteIdent, sql } from './statement.js';

/**
 * The channels of an install are named after its schema, so that two installs
 * in one database do not hear each other: "<schema>.stampeded_insert" (the
 * insert trigger: a job is due now in the queue named by the payload),
 * "<schema>.stampeded_cancel" (stampeded_cancel: the job whose id is the
 * payload was cancelled while claimed), "<schema>.stampeded_events" (the
 * outcomes workers record, while someone listens; see
 * events/event-notification.ts) and "<schema>.stampeded_listening" (an app
 * started listening to the events: the workers start sending them).
 */
export const insertChannel = (schema: string): string => `${schema}.stampeded_insert`;
export const cancelChannel = (schema: string): string => `${schema}.stampeded_cancel`;
export const eventsChannel = (schema: string): string => `${schema}.stampeded_events`;
export const listeningChannel = (schema: string): string => `${schema}.stampeded_listening`;

/**
 * The key of the advisory lock that every connection listening to the
 * schema's job events holds, shared, for as long as it listens: workers count
 * its holders to know whether anyone listens, and notify nobody otherwise. A
 * connection that drops releases it with everything else it held.
 */
export const eventsListenerLock = (schema: string): string => `stampeded.events.${schema}`;

/**
 * Not a prepared statement: LISTEN takes no parameters, so the channels are
 * spliced in quoted.
 */
export function listenTo(channels: readonly string[]): string {
  return channels.map((channel) => `LISTEN ${quoteIdent(channel)}`).join('; ');
}

export function unlistenFrom(channels: readonly string[]): string {
  return channels.map((channel) => `UNLISTEN ${quoteIdent(channel)}`).join('; ');
}

/** Never waits: only shared holders take this key. */
export const HOLD_SHARED_LOCK = `SELECT pg_try_advisory_lock_shared(hashtextextended($1::text, 0)) AS held`;

export const RELEASE_SHARED_LOCK = `SELECT pg_advisory_unlock_shared(hashtextextended($1::text, 0)) AS released`;

/**
 * How many sessions hold the lock whose key is the parameter `key` (shared
 * or not), as pg_locks shows an advisory lock on a bigint key: its high half
 * as classid, its low half as objid, objsubid 1. A NULL key counts nobody.
 */
export const lockHolders = (key: '$1' | '$2'): string => `(
    SELECT count(*)::int FROM pg_locks l
     WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
       AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND ((l.classid::int8 << 32) | l.objid::int8) = hashtextextended(${key}::text, 0))`;

export const EVENT_LISTENERS = sql('stampeded_event_listeners', `SELECT ${lockHolders('$1')} AS listeners`);

export const ANNOUNCE = sql('stampeded_announce', `SELECT pg_notify($1, $2)`);
