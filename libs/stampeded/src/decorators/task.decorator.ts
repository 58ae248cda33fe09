import { applyDecorators, Injectable, SetMetadata } from '@nestjs/common';
import { TASK_METADATA } from '../stampeded.constants.js';
import type { TaskMetadata, TaskOptions } from '../interfaces/task.interface.js';

/**
 * Marks a provider class as the handler of a task: its `handle(args, ctx)`
 * runs each job of that name. The options are the task's job defaults.
 *
 * @example
 * @Task('send-email', { queue: 'emails', maxAttempts: 5 })
 * export class SendEmail implements TaskHandler<{ to: string }> {
 *   async handle(args: { to: string }, ctx: JobContext) {}
 * }
 */
export function Task(name: string, options: TaskOptions = {}): ClassDecorator {
  const metadata: TaskMetadata = { ...options, name };
  return applyDecorators(Injectable(), SetMetadata(TASK_METADATA, metadata));
}
