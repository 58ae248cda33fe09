import { quoteIdent } from './statement.js';

/**
 * The channels of an install are named after its schema, so that two installs
 * in one database do not hear each other: "<schema>.stampeded_insert" (the
 * insert trigger: a job is due now in the queue named by the payload),
 * "<schema>.stampeded_cancel" (stampeded_cancel: the job whose id is the
 * payload was cancelled while claimed) and "<schema>.stampeded_events" (the
 * outcomes workers record, when `events: 'fleet'`; see events/fleet-events.ts).
 */
export const insertChannel = (schema: string): string => `${schema}.stampeded_insert`;
export const cancelChannel = (schema: string): string => `${schema}.stampeded_cancel`;
export const eventsChannel = (schema: string): string => `${schema}.stampeded_events`;

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
