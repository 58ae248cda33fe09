import type { Type } from '@nestjs/common';
import { StampededConfigError } from '../errors/stampeded.errors.js';
import { TASK_METADATA } from '../stampeded.constants.js';
import { NOT_A_TASK_CLASS } from '../stampeded.messages.js';
import type { TaskMetadata } from '../interfaces/task.interface.js';

/**
 * What @Task() wrote on a class, whether or not this app provides it: an
 * API process imports its task classes for their types and enqueues them
 * for workers elsewhere. Refuses a class @Task() did not mark.
 */
export function taskMetadataOf(classRef: Type<unknown>): TaskMetadata {
  const metadata = Reflect.getMetadata(TASK_METADATA, classRef) as TaskMetadata | undefined;
  if (!metadata) throw new StampededConfigError(NOT_A_TASK_CLASS(classRef?.name ?? String(classRef)));
  return metadata;
}

/** A task's name, given the name or its @Task() class. */
export function taskNameOf(task: string | Type<unknown>): string {
  return typeof task === 'function' ? taskMetadataOf(task).name : task;
}
