import { NOT_A_JOB_ID, NOT_A_WORKFLOW_ID } from '../dashboard.messages.js';

/** An input the operator got wrong: a 400 in the API, exit code 2 in the CLI. */
export class InspectorInputError extends Error {
  override name = 'InspectorInputError';
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID.test(value);
}

export function assertJobId(id: string): void {
  if (!isUuid(id)) throw new InspectorInputError(NOT_A_JOB_ID(id));
}

export function assertWorkflowId(id: string): void {
  if (!isUuid(id)) throw new InspectorInputError(NOT_A_WORKFLOW_ID(id));
}
