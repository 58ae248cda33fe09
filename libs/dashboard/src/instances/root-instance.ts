import type { QueryResultRow } from 'pg';
import { DEFAULT_INSTANCE, type Statement } from '@stampeded/nestjs/internal';
import type { StampededInstances } from '@stampeded/nestjs/internal-runtime';
import type { QueueControlService } from '@stampeded/nestjs';
import type { InspectorDatabase, InspectorReads } from '../inspector/inspector-database.js';
import { UNKNOWN_DASHBOARD_INSTANCE } from '../dashboard.messages.js';

/**
 * The instance the dashboard's own path and its API's serve: the default
 * one; in an app that declares only named instances, the first the switcher
 * lists, whose pages then link to their own URLs under `<path>/instances/<name>`.
 */
export function rootInstance(instances: Pick<StampededInstances, 'has' | 'names'> | undefined): string {
  if (!instances || instances.has(DEFAULT_INSTANCE)) return DEFAULT_INSTANCE;
  return instances.names()[0] ?? DEFAULT_INSTANCE;
}

type Instance = NonNullable<ReturnType<StampededInstances['get']>>;

/**
 * The primary and the reads of the instance the root serves, in an app with
 * only named instances, looked up at each call: each instance's handle is
 * built by its own module's provider, in an order Nest chooses, so which
 * one comes first is known only once all are, which may be after the
 * dashboard's providers were built.
 */
export function rootInstanceDatabases(instances: StampededInstances): { db: InspectorDatabase; reads: InspectorReads } {
  const instance = (): Instance => {
    const name = rootInstance(instances);
    const found = instances.get(name);
    if (!found) throw new Error(UNKNOWN_DASHBOARD_INSTANCE(name, instances.names()));
    return found;
  };
  const db: InspectorDatabase = {
    get schema() {
      return instance().database.schema;
    },
    query: <Row extends QueryResultRow>(statement: Statement, values?: unknown[]) => instance().database.query<Row>(statement, values),
  };
  const reads: InspectorReads = {
    get schema() {
      return instance().reads.schema;
    },
    query: <Row extends QueryResultRow>(statement: Statement, values?: unknown[]) => instance().reads.query<Row>(statement, values),
    status: () => instance().reads.status(),
    catchUp: (timeoutMs) => instance().reads.catchUp(timeoutMs),
  };
  return { db, reads };
}

/** What the dashboard asks of a QueueControlService: that its gates read a policy or a breaker an operator just changed. */
export type GateRefresher = Pick<QueueControlService, 'refreshGates'>;

/** The QueueControlService of the instance the root serves, looked up at each call for the same reason as its databases. */
export function rootInstanceControl(instances: StampededInstances): GateRefresher {
  return { refreshGates: async () => instances.get(rootInstance(instances))?.control.refreshGates() };
}
