import type { Breaker, QueuePolicy, QueuePolicyRow } from '@stampeded/nestjs';
import { BREAKER_RESET, LIST_BREAKERS, StampededConfigError, UPSERT_POLICY, toBreaker, toPolicy, validateQueuePolicy } from '@stampeded/nestjs/internal';
import { BAD_POLICY } from '../dashboard.messages.js';
import type { InspectorDatabase } from './inspector-database.js';
import { InspectorInputError } from './inspector-input.js';

/** The fields of a queue's policy, as a form names them: QueuePolicy's keys. */
export const POLICY_FIELDS = ['maxRunning', 'maxWaitSecs'] as const;

/**
 * A policy out of a form or a JSON body, for the core's validateQueuePolicy()
 * to judge: an empty field is no limit (null), a field that reads as a
 * number is that number, anything else goes through as typed so that the
 * message quotes it. From a form (`fields` given), only the policy's fields
 * are read (it also carries the CSRF token and the page to return to); from
 * a JSON body every key goes through, so a misspelt one is named.
 */
export function policyFromInput(input: Record<string, unknown> | undefined, fields?: readonly string[]): Record<string, unknown> {
  const entries = Object.entries(input ?? {}).filter(([key]) => !fields || fields.includes(key));
  return Object.fromEntries(
    entries.map(([key, value]) => {
      if (typeof value !== 'string') return [key, value];
      const text = value.trim();
      return [key, text === '' || text === 'none' ? null : /^[+-]?\d+(\.\d+)?$/.test(text) ? Number(text) : text];
    }),
  );
}

/**
 * A queue's policy and the destinations' breakers, changed with the core's
 * statements (UPSERT_POLICY, BREAKER_RESET) after the core's validation,
 * each change recorded with who made it: the same rows
 * QueueControlService.setPolicy() and closeBreaker() write.
 */
export class QueuePolicyActions {
  constructor(private readonly db: InspectorDatabase) {}

  /** Validates first: a bad value is an InspectorInputError saying what was wrong, and nothing is written. */
  async setPolicy(queue: string, input: Record<string, unknown>, by: string): Promise<QueuePolicyRow> {
    let policy: { maxRunning: number | null; maxWaitSecs: number | null };
    try {
      policy = validateQueuePolicy(`The policy of queue ${JSON.stringify(queue)}`, input as QueuePolicy);
    } catch (error) {
      if (error instanceof StampededConfigError) throw new InspectorInputError(BAD_POLICY(error.message));
      throw error;
    }
    const [row] = await this.db.query(UPSERT_POLICY, [queue, policy.maxRunning, policy.maxWaitSecs, by]);
    return toPolicy(row);
  }

  async breakers(): Promise<Breaker[]> {
    return (await this.db.query(LIST_BREAKERS)).map(toBreaker);
  }

  /** Closes a destination's breaker, its deferred jobs due at once; null when the destination has no breaker. */
  async closeBreaker(destination: string, by: string): Promise<Breaker | null> {
    const [row] = await this.db.query<{ closed: boolean }>(BREAKER_RESET, [destination, by]);
    if (!row?.closed) return null;
    return (await this.breakers()).find((b) => b.destination === destination) ?? null;
  }
}
